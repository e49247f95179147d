// The client of torchrun's agent store against a server speaking PyTorch 2.x's TCPStore protocol
// (torch_store_server.py, a stand-in for the agent: Debian's torchrun does not start on Python
// 3.11): values, counters, waits that time out naming the missing keys, the attempt's prefix, and
// a clear error when nothing listens.
#include <gtest/gtest.h>

#include <signal.h>

#include "core/errors.h"
#include "runtime/distributed/torch_store_client.h"
#include "tests/distributed/process_support.h"

namespace sublet::distributed {
namespace {

using namespace std::chrono_literals;

class TorchStoreClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = static_cast<std::uint16_t>(sublet::testing::free_port());
    log_ = std::filesystem::temp_directory_path() / ("torch_store_" + std::to_string(::getpid()) + ".log");
    server_ = sublet::testing::spawn_process({"/usr/bin/env", "python3", TORCH_STORE_SERVER, std::to_string(port_)}, {},
                                             log_);
    for (int i = 0; i < 500 && sublet::testing::read_text(log_).find("ready") == std::string::npos; ++i)
      std::this_thread::sleep_for(10ms);
    ASSERT_NE(sublet::testing::read_text(log_).find("ready"), std::string::npos) << sublet::testing::read_text(log_);
  }
  void TearDown() override {
    kill(server_.pid, SIGKILL);
    sublet::testing::wait_exit(server_, 10s);
  }
  TorchStoreClient client(const std::string& prefix = "/worker/attempt_0/") {
    return TorchStoreClient({.host = "127.0.0.1", .port = port_, .key_prefix = prefix, .connect_timeout = 10s,
                             .timeout = 10s});
  }

  std::uint16_t port_ = 0;
  std::filesystem::path log_;
  sublet::testing::Child server_;
};

TEST_F(TorchStoreClientTest, ValuesAndCountersAreSharedBetweenClients) {
  auto a = client();
  auto b = client();
  a.set("sublet/gloo/0", std::string("\0bytes\xff", 7));
  EXPECT_EQ(b.get("sublet/gloo/0", 5s), std::string("\0bytes\xff", 7));
  EXPECT_EQ(a.add("sublet/heartbeat/1", 1), 1);
  EXPECT_EQ(b.add("sublet/heartbeat/1", 2), 3);
  EXPECT_EQ(a.add("sublet/heartbeat/1", 0), 3);
}

TEST_F(TorchStoreClientTest, AWaitReturnsOnceAKeyArrivesAndNamesTheMissingOnTimeout) {
  auto a = client();
  std::thread later([this] {
    std::this_thread::sleep_for(100ms);
    client().set("sublet/rank/1", "joined");
  });
  EXPECT_EQ(a.wait_for_keys({"sublet/rank/1"}, 10s), std::vector<std::string>{});
  later.join();
  EXPECT_EQ(a.wait_for_keys({"sublet/rank/1", "sublet/rank/2"}, 200ms), std::vector<std::string>{"sublet/rank/2"});
  try {
    a.get("sublet/never", 100ms);
    FAIL() << "expected DistributedError";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("get('sublet/never') timed out"), std::string::npos) << e.what();
  }
}

TEST_F(TorchStoreClientTest, TheAttemptPrefixKeepsRestartsApart) {
  client("/worker/attempt_0/").set("sublet/rank/0", "joined");
  EXPECT_EQ(client("/worker/attempt_1/").wait_for_keys({"sublet/rank/0"}, 100ms),
            std::vector<std::string>{"sublet/rank/0"});
}

TEST(TorchStoreClient, NothingListeningIsAClearErrorNamingTheAgentStore) {
  const auto port = static_cast<std::uint16_t>(sublet::testing::free_port());
  try {
    TorchStoreClient({.host = "127.0.0.1", .port = port, .connect_timeout = 200ms, .timeout = 1s});
    FAIL() << "expected DistributedError";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("could not connect to torchrun's agent store at 127.0.0.1:"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("TORCHELASTIC_USE_AGENT_STORE=True"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sublet::distributed
