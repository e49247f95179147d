// Allocator stress: N threads x M mixed allocate / free / record_stream operations on the
// simulated backend (with stream events completing at random), then the invariants: statistics
// equal the sum of live blocks, blocks tile their segments, free neighbours are coalesced, and
// everything returns to zero. Built and run under ThreadSanitizer in CI (scripts/sanitize.sh).
//   allocator_stress [threads] [operations_per_thread]
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "memory/caching_allocator.h"
#include "memory/simulated_backend.h"

using namespace sublet::memory;

namespace {

int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "invariant violated: %s\n", what.c_str());
  }
}

void check_invariants(const CachingAllocator& allocator, std::int64_t live_bytes) {
  const DeviceStats stats = allocator.stats();
  std::int64_t reserved = 0, allocated = 0;
  for (const SegmentInfo& segment : allocator.snapshot()) {
    std::uintptr_t expected = segment.address;
    bool previous_free = false;
    for (const BlockInfo& block : segment.blocks) {
      check(block.address == expected, "blocks tile their segment");
      expected += block.size;
      const bool free_now = block.state == BlockInfo::State::Inactive;
      check(!(free_now && previous_free), "free neighbours are coalesced");
      previous_free = free_now;
      if (block.state == BlockInfo::State::ActiveAllocated) allocated += static_cast<std::int64_t>(block.size);
    }
    reserved += static_cast<std::int64_t>(segment.total_size);
  }
  check(stats.reserved_bytes[StatType::All].current == reserved, "reserved stat = sum of segments");
  check(stats.allocated_bytes[StatType::All].current == allocated, "allocated stat = sum of allocated blocks");
  check(allocated == live_bytes, "allocated blocks = what the threads hold");
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 8;
  const long operations = argc > 2 ? std::atol(argv[2]) : 1'000'000;
  auto backend = std::make_unique<SimulatedBackend>(std::size_t{1} << 40);
  SimulatedBackend& sim = *backend;
  CachingAllocator allocator(std::move(backend));
  const auto side_stream = reinterpret_cast<sublet::StreamHandle>(std::uintptr_t{99});
  std::atomic<std::int64_t> live_bytes{0};
  std::vector<std::vector<Block*>> held(static_cast<std::size_t>(threads));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) * 7919 + 1);
      std::vector<Block*>& mine = held[static_cast<std::size_t>(t)];
      const auto stream = reinterpret_cast<sublet::StreamHandle>(static_cast<std::uintptr_t>(t % 2));
      for (long i = 0; i < operations; ++i) {
        const unsigned op = static_cast<unsigned>(rng() % 100);
        if (!mine.empty() && (op < 45 || mine.size() >= 64)) {
          const std::size_t victim = rng() % mine.size();
          live_bytes -= static_cast<std::int64_t>(mine[victim]->size);
          allocator.free(mine[victim]);
          mine[victim] = mine.back();
          mine.pop_back();
        } else if (!mine.empty() && op < 50) {
          allocator.record_stream(mine[rng() % mine.size()], side_stream);
        } else if (op < 51) {
          sim.complete_stream_work(side_stream);
        } else {
          const std::size_t size = (std::size_t{1} << (9 + rng() % 16)) + rng() % 5000;
          Block* b = allocator.allocate(size, stream);
          live_bytes += static_cast<std::int64_t>(b->size);
          mine.push_back(b);
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  check_invariants(allocator, live_bytes.load());
  for (auto& mine : held)
    for (Block* b : mine) allocator.free(b);
  sim.complete_stream_work(side_stream);
  allocator.empty_cache();
  check(allocator.memory_allocated() == 0, "nothing allocated at the end");
  check(allocator.memory_reserved() == 0, "nothing reserved after empty_cache");
  check(sim.used_bytes() == 0, "the backend got every byte back");
  std::printf("allocator_stress: %d threads x %ld operations: %s (%d violations)\n", threads, operations,
              failures == 0 ? "all invariants hold" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}
