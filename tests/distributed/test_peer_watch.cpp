// PeerWatch names the ranks whose heartbeat stood still: three ranks beat into one store (each
// with its own connections, as in three processes); one stops beating and is named by the
// others; the store going away names rank 0.
#include <gtest/gtest.h>

#include "runtime/distributed/peer_watch.h"
#include "tests/distributed/store_test_support.h"

namespace sublet::distributed {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Store> connect(const testing::LoopbackStore& store) {
  return std::make_unique<StoreClient>(
      StoreClientOptions{.host = "127.0.0.1", .port = store.server->port(), .token = testing::kToken, .timeout = 2s});
}

TEST(PeerWatch, NamesTheRankThatStoppedBeatingAndNoOther) {
  testing::LoopbackStore store;
  std::vector<std::unique_ptr<PeerWatch>> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.push_back(std::make_unique<PeerWatch>(connect(store), connect(store), r, 3, 50ms, true));
  EXPECT_EQ(ranks[0]->silent_ranks(200ms), std::vector<int>{}) << "every rank beats";
  ranks[2].reset();  // rank 2 dies
  EXPECT_EQ(ranks[0]->silent_ranks(200ms), std::vector<int>{2});
  EXPECT_EQ(ranks[1]->silent_ranks(200ms), std::vector<int>{2});
  const std::string text = ranks[0]->diagnose();
  EXPECT_NE(text.find("rank 2 stopped responding"), std::string::npos) << text;
}

// A rank that saw the failure too, diagnosed it and left stopped beating because it ended: the
// ranks that diagnose after it blame only the one that died.
TEST(PeerWatch, ARankThatDiagnosedAndLeftIsNotBlamed) {
  testing::LoopbackStore store;
  std::vector<std::unique_ptr<PeerWatch>> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.push_back(std::make_unique<PeerWatch>(connect(store), connect(store), r, 3, 50ms, true));
  ranks[1].reset();  // rank 1 dies
  ranks[2]->report_diagnosed();
  ranks[2].reset();  // rank 2 diagnosed it and ends
  EXPECT_EQ(ranks[0]->silent_ranks(200ms), std::vector<int>{1});
  const std::string text = ranks[0]->diagnose();
  EXPECT_NE(text.find("rank 1 stopped responding"), std::string::npos) << text;
}

TEST(PeerWatch, AStoreThatIsGoneNamesRankZero) {
  auto store = std::make_unique<testing::LoopbackStore>();
  PeerWatch watch(connect(*store), connect(*store), 1, 2, 50ms, true);
  store.reset();  // rank 0, which serves the store, is gone
  const std::string text = watch.diagnose();
  EXPECT_NE(text.find("rank 0 is unreachable"), std::string::npos) << text;
}

TEST(PeerWatch, TheBeatIntervalFollowsTheTimeoutWithinItsBounds) {
  EXPECT_EQ(PeerWatch::interval_for(60s), 2000ms);
  EXPECT_EQ(PeerWatch::interval_for(10s), 500ms);
  EXPECT_EQ(PeerWatch::interval_for(1s), 200ms);
}

}  // namespace
}  // namespace sublet::distributed
