// Stream-ordered reuse: a block freed while another stream may still use it goes back
// to its own stream at once, and the allocation that takes its bytes makes that stream wait on
// the other stream's event; no host wait, no device synchronisation. The simulated backend
// records the waits; test_cuda_allocator.cpp checks the same on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "alloc_test_support.h"
#include "allocator_invariants.h"

using namespace sublet::memory;
using sublet::memory::testing::SimulatedAllocator;
using sublet::memory::testing::at;

namespace {

constexpr std::size_t kGiB = 1024 * kMiB;
sublet::StreamHandle stream(std::uintptr_t id) { return reinterpret_cast<sublet::StreamHandle>(id); }
using Wait = std::pair<sublet::StreamHandle, sublet::StreamHandle>;  // (waiting, waited on)

struct OrderedAllocator : SimulatedAllocator {
  explicit OrderedAllocator(std::size_t capacity = kGiB, const std::string& conf = "") : SimulatedAllocator(capacity, conf) {
    backend->enable_stream_waits(true);
  }
};

}  // namespace

TEST(StreamOrderedReuse, AFreedBlockIsReusedAtOnceBehindAStreamWait) {
  OrderedAllocator a;
  Block* b = a.allocator.allocate(4 * kMiB, stream(1));
  char* b_at = at(b);
  a.allocator.record_stream(b, stream(2));  // e.g. the communication stream reads it
  a.allocator.free(b);
  EXPECT_EQ(a.stat("active.all.current"), 0);  // inactive at once: nothing waits on the host
  Block* again = a.allocator.allocate(4 * kMiB, stream(1));
  EXPECT_EQ(at(again), b_at);
  EXPECT_EQ(a.backend->stream_waits(), (std::vector<Wait>{{stream(1), stream(2)}}));
  EXPECT_EQ(a.stat("num_stream_ordered_reuses"), 1);
  EXPECT_EQ(a.stat("num_sync_all_streams"), 0);
  EXPECT_EQ(a.backend->synchronize_calls(), 0u);
  a.allocator.free(again);
  // The events were used up by the first reuse: the next taker waits for nothing.
  a.allocator.free(a.allocator.allocate(4 * kMiB, stream(1)));
  EXPECT_EQ(a.backend->stream_waits().size(), 1u);
  sublet::memory::testing::expect_consistent(a.allocator);
}

TEST(StreamOrderedReuse, NoWaitWhenTheOtherStreamHasFinished) {
  OrderedAllocator a;
  Block* b = a.allocator.allocate(4 * kMiB, stream(1));
  a.allocator.record_stream(b, stream(2));
  a.allocator.free(b);
  a.backend->complete_stream_work(stream(2));
  a.allocator.free(a.allocator.allocate(4 * kMiB, stream(1)));
  EXPECT_TRUE(a.backend->stream_waits().empty());
  EXPECT_EQ(a.stat("num_stream_ordered_reuses"), 0);
}

TEST(StreamOrderedReuse, MergedNeighboursCarryTheirEventsAndOneTakerWaitsForAll) {
  OrderedAllocator a;
  // Two 4 MiB blocks of one 20 MiB segment, each used by another stream.
  Block* low = a.allocator.allocate(4 * kMiB, stream(1));
  Block* high = a.allocator.allocate(4 * kMiB, stream(1));
  ASSERT_EQ(at(high), at(low) + 4 * kMiB);
  a.allocator.record_stream(low, stream(2));
  a.allocator.record_stream(high, stream(3));
  a.allocator.free(low);
  a.allocator.free(high);
  EXPECT_EQ(a.stat("num_device_alloc"), 1);
  Block* whole = a.allocator.allocate(8 * kMiB, stream(1));  // served from the merged free bytes
  EXPECT_EQ(at(whole), at(low));
  auto waits = a.backend->stream_waits();
  std::sort(waits.begin(), waits.end());
  EXPECT_EQ(waits, (std::vector<Wait>{{stream(1), stream(2)}, {stream(1), stream(3)}}));
  a.allocator.free(whole);
  sublet::memory::testing::expect_consistent(a.allocator);
}

TEST(StreamOrderedReuse, TheRemainderOfASplitNeedsNoSecondWait) {
  OrderedAllocator a;
  Block* b = a.allocator.allocate(8 * kMiB, stream(1));
  a.allocator.record_stream(b, stream(2));
  a.allocator.free(b);
  Block* first = a.allocator.allocate(2 * kMiB, stream(1));   // split off the freed bytes: waits
  Block* second = a.allocator.allocate(2 * kMiB, stream(1));  // the remainder: ordered after that wait
  EXPECT_EQ(at(second), at(first) + 2 * kMiB);
  EXPECT_EQ(a.backend->stream_waits().size(), 1u);
  a.allocator.free(first);
  a.allocator.free(second);
}

TEST(StreamOrderedReuse, GivingTheBytesBackWaitsForTheEventsOnce) {
  OrderedAllocator a;
  Block* b = a.allocator.allocate(4 * kMiB, stream(1));
  a.allocator.record_stream(b, stream(2));
  a.allocator.free(b);
  a.allocator.empty_cache();  // cudaFree is not stream-ordered: the other stream must be done
  EXPECT_EQ(a.stat("num_sync_all_streams"), 1);
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
  // Events that have completed need no synchronisation.
  Block* c = a.allocator.allocate(4 * kMiB, stream(1));
  a.allocator.record_stream(c, stream(2));
  a.allocator.free(c);
  a.backend->complete_stream_work(stream(2));
  a.allocator.empty_cache();
  EXPECT_EQ(a.stat("num_sync_all_streams"), 1);
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
}

TEST(StreamOrderedReuse, UnmappingAnExpandableTailWaitsForItsEvents) {
  OrderedAllocator a(kGiB, "expandable_segments:True");
  Block* b = a.allocator.allocate(40 * kMiB, stream(1));
  a.allocator.record_stream(b, stream(2));
  a.allocator.free(b);
  a.allocator.empty_cache();
  EXPECT_EQ(a.stat("num_sync_all_streams"), 1);
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
}

TEST(StreamOrderedReuse, PrivatePoolsKeepTheDeferredPath) {
  // A capture must not wait on events recorded outside it: blocks of a private pool wait on the
  // host side (rejoin the free set once the event has completed), as without stream waits.
  OrderedAllocator a;
  const auto pool = a.allocator.create_private_pool();
  a.allocator.begin_allocate_to_pool(pool, stream(5));
  Block* b = a.allocator.allocate(4 * kMiB, stream(5));
  char* b_at = at(b);
  a.allocator.record_stream(b, stream(2));
  a.allocator.free(b);
  EXPECT_EQ(a.stat("active.all.current"), 1);  // pending
  Block* meanwhile = a.allocator.allocate(4 * kMiB, stream(5));
  EXPECT_NE(at(meanwhile), b_at);
  EXPECT_TRUE(a.backend->stream_waits().empty());
  a.allocator.free(meanwhile);
  a.allocator.end_allocate_to_pool(pool);
  a.backend->complete_stream_work(stream(2));
  a.allocator.release_private_pool(pool);
  a.allocator.empty_cache();
}

TEST(StreamOrderedReuse, BackendsWithoutStreamWaitsDeferAsBefore) {
  SimulatedAllocator a(kGiB);  // stream waits off: PyTorch's rule
  Block* b = a.allocator.allocate(4 * kMiB, stream(1));
  char* b_at = at(b);
  a.allocator.record_stream(b, stream(2));
  a.allocator.free(b);
  Block* meanwhile = a.allocator.allocate(4 * kMiB, stream(1));
  EXPECT_NE(at(meanwhile), b_at);
  EXPECT_EQ(a.stat("num_stream_ordered_reuses"), 0);
  a.allocator.free(meanwhile);
}
