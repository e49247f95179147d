// The waste split (memory/waste.h) on the simulated backend: one sequence per kind that creates
// exactly that waste and the figure it must show; the split at the reserved peak; the sum
// identity on seeded random sequences under each setting; the out-of-memory message naming the
// setting for the largest kind; memory_summary()'s section and memory_stats()'s keys.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "alloc_test_support.h"
#include "core/errors.h"

using namespace sublet::memory;
using sublet::OutOfMemoryError;
using sublet::memory::testing::SimulatedAllocator;

namespace {

constexpr std::size_t kGiB = 1024 * kMiB;

sublet::StreamHandle stream(int n) { return reinterpret_cast<sublet::StreamHandle>(static_cast<std::uintptr_t>(n)); }

// The split with only the named figures non-zero.
struct Expected {
  std::size_t requested = 0, rounding = 0, rounding_of_sizes = 0;
  std::size_t holes_small = 0, holes_large = 0, free_small = 0, free_large = 0, mapped_unused = 0;
};

void expect_split(const WasteSplit& w, const Expected& e, std::size_t reserved) {
  EXPECT_EQ(w.reserved, reserved);
  EXPECT_EQ(w.requested, e.requested);
  EXPECT_EQ(w.rounding, e.rounding);
  EXPECT_EQ(w.rounding_of_sizes, e.rounding_of_sizes);
  EXPECT_EQ(w.holes.small_pool, e.holes_small);
  EXPECT_EQ(w.holes.large_pool, e.holes_large);
  EXPECT_EQ(w.free_segments.small_pool, e.free_small);
  EXPECT_EQ(w.free_segments.large_pool, e.free_large);
  EXPECT_EQ(w.mapped_unused, e.mapped_unused);
  EXPECT_EQ(w.requested + w.wasted(), w.reserved);
}

std::string oom_message(CachingAllocator& allocator, std::size_t bytes, sublet::StreamHandle on = nullptr) {
  try {
    allocator.free(allocator.allocate(bytes, on));
  } catch (const OutOfMemoryError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string line_starting(const std::string& text, const std::string& start) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(start, 0) == 0) return line;
  return "";
}

}  // namespace

// ---- one kind at a time ------------------------------------------------------------------------

TEST(WasteSplit, RoundingToTheGranule) {
  SimulatedAllocator a(kGiB);
  // 10 MiB - 100 B rounds to 10 MiB, which is its own segment exactly: 100 B of rounding, nothing else.
  Block* b = a.allocator.allocate(10 * kMiB - 100);
  expect_split(a.allocator.waste(), {.requested = 10 * kMiB - 100, .rounding = 100, .rounding_of_sizes = 100}, 10 * kMiB);
  a.allocator.free(b);
}

TEST(WasteSplit, RoundingByPowerOfTwoDivisions) {
  SimulatedAllocator a(kGiB, "roundup_power2_divisions:4");
  // Between 8 and 16 MiB the steps are 2 MiB: 12 MiB + 1 B rounds to 14 MiB, a segment of its own.
  Block* b = a.allocator.allocate(12 * kMiB + 1);
  expect_split(a.allocator.waste(), {.requested = 12 * kMiB + 1, .rounding = 2 * kMiB - 1, .rounding_of_sizes = 2 * kMiB - 1},
               14 * kMiB);
  a.allocator.free(b);
}

TEST(WasteSplit, RoundingOfABlockHandedOutWhole) {
  SimulatedAllocator a(kGiB);
  // 19.5 MiB gets a 20 MiB segment; the 0.5 MiB remainder is too small to split off (<= 1 MiB).
  Block* b = a.allocator.allocate(19 * kMiB + kMiB / 2);
  expect_split(a.allocator.waste(), {.requested = 19 * kMiB + kMiB / 2, .rounding = kMiB / 2}, 20 * kMiB);
  a.allocator.free(b);
  // A cached 12 MiB segment serves 11.5 MiB whole as well.
  SimulatedAllocator c(kGiB);
  c.allocator.free(c.allocator.allocate(12 * kMiB));
  Block* reused = c.allocator.allocate(11 * kMiB + kMiB / 2);
  expect_split(c.allocator.waste(), {.requested = 11 * kMiB + kMiB / 2, .rounding = kMiB / 2}, 12 * kMiB);
  c.allocator.free(reused);
}

TEST(WasteSplit, HolesBetweenLiveBlocksByPool) {
  SimulatedAllocator a(kGiB);
  std::vector<Block*> large;  // ten 2 MiB blocks fill one 20 MiB large-pool segment
  for (int i = 0; i < 10; ++i) large.push_back(a.allocator.allocate(2 * kMiB));
  std::vector<Block*> small;  // four 512 KiB blocks fill one 2 MiB small-pool segment
  for (int i = 0; i < 4; ++i) small.push_back(a.allocator.allocate(512 * 1024));
  expect_split(a.allocator.waste(), {.requested = 22 * kMiB}, 22 * kMiB);
  a.allocator.free(large[0]);
  a.allocator.free(large[2]);
  a.allocator.free(small[1]);
  expect_split(a.allocator.waste(), {.requested = 22 * kMiB - 4 * kMiB - kMiB / 2, .holes_small = kMiB / 2, .holes_large = 4 * kMiB},
               22 * kMiB);
  for (int i : {1, 3, 4, 5, 6, 7, 8, 9}) a.allocator.free(large[i]);
  for (int i : {0, 2, 3}) a.allocator.free(small[i]);
}

TEST(WasteSplit, WhollyFreeSegmentsByPool) {
  SimulatedAllocator a(kGiB);
  a.allocator.free(a.allocator.allocate(12 * kMiB));  // a 12 MiB large-pool segment, cached
  Block* x = a.allocator.allocate(kMiB);
  Block* y = a.allocator.allocate(kMiB);  // x and y fill a 2 MiB small-pool segment
  a.allocator.free(x);
  a.allocator.free(y);
  expect_split(a.allocator.waste(), {.free_small = 2 * kMiB, .free_large = 12 * kMiB}, 14 * kMiB);
  a.allocator.empty_cache();
  expect_split(a.allocator.waste(), {}, 0);
}

TEST(WasteSplit, MappedButUnusedTailOfAnExpandableSegment) {
  SimulatedAllocator a(kGiB, "expandable_segments:True");
  // 3 MiB maps two 2 MiB pages: 1 MiB is mapped past the last live block.
  Block* first = a.allocator.allocate(3 * kMiB);
  expect_split(a.allocator.waste(), {.requested = 3 * kMiB, .mapped_unused = kMiB}, 4 * kMiB);
  // The next 3 MiB takes that 1 MiB and one more page: nothing unused.
  Block* second = a.allocator.allocate(3 * kMiB);
  expect_split(a.allocator.waste(), {.requested = 6 * kMiB}, 6 * kMiB);
  // Freeing the first leaves a hole before a live block, not an unused tail.
  a.allocator.free(first);
  expect_split(a.allocator.waste(), {.requested = 3 * kMiB, .holes_large = 3 * kMiB}, 6 * kMiB);
  // With nothing live, every mapped byte is unused; empty_cache() unmaps it.
  a.allocator.free(second);
  expect_split(a.allocator.waste(), {.mapped_unused = 6 * kMiB}, 6 * kMiB);
  a.allocator.empty_cache();
  expect_split(a.allocator.waste(), {}, 0);
}

TEST(WasteSplit, BlocksWaitingForAnotherStreamAreLive) {
  SimulatedAllocator a(kGiB);
  Block* b = a.allocator.allocate(12 * kMiB, stream(1));
  a.allocator.record_stream(b, stream(2));
  a.allocator.free(b);  // waits for stream 2's work: still requested, not free
  expect_split(a.allocator.waste(), {.requested = 12 * kMiB}, 12 * kMiB);
  a.backend->complete_stream_work(stream(2));
  a.allocator.free(a.allocator.allocate(512, stream(1)));  // processes the completed event
  a.allocator.empty_cache();
  expect_split(a.allocator.waste(), {}, 0);
}

// ---- at the reserved peak ----------------------------------------------------------------------

TEST(WasteSplit, AtThePeakIsTheMomentReservedFirstReachedIt) {
  SimulatedAllocator a(kGiB);
  Block* x = a.allocator.allocate(10 * kMiB);  // its own 10 MiB segment
  Block* y = a.allocator.allocate(2 * kMiB);   // a new 20 MiB segment: the peak, 30 MiB
  Block* z = a.allocator.allocate(4 * kMiB);   // fits in y's segment: reserved stays at the peak
  a.allocator.free(y);
  a.allocator.free(z);
  a.allocator.free(x);
  // At the peak: 12 MiB requested, y's segment's remaining 18 MiB a hole; z came later.
  expect_split(a.allocator.waste_at_peak(), {.requested = 12 * kMiB, .holes_large = 18 * kMiB}, 30 * kMiB);
  expect_split(a.allocator.waste(), {.free_large = 30 * kMiB}, 30 * kMiB);
  const auto stats = a.allocator.memory_stats();
  EXPECT_EQ(stats.at("waste.holes_bytes.large_pool.at_peak"), static_cast<std::int64_t>(18 * kMiB));
  EXPECT_EQ(stats.at("waste.holes_bytes.all.current"), 0);
  EXPECT_EQ(stats.at("waste.free_segments_bytes.large_pool.current"), static_cast<std::int64_t>(30 * kMiB));
  EXPECT_EQ(stats.at("waste.requested_bytes.all.at_peak"), static_cast<std::int64_t>(12 * kMiB));
  EXPECT_EQ(stats.at("waste.reserved_bytes.all.at_peak"), stats.at("reserved_bytes.all.peak"));
  // A reset starts the peak again from now.
  a.allocator.reset_peak_memory_stats();
  expect_split(a.allocator.waste_at_peak(), {.free_large = 30 * kMiB}, 30 * kMiB);
  a.allocator.empty_cache();
  Block* again = a.allocator.allocate(4 * kMiB);  // 20 MiB: below the reset peak of 30 MiB
  expect_split(a.allocator.waste_at_peak(), {.free_large = 30 * kMiB}, 30 * kMiB);
  a.allocator.free(again);
}

// ---- the sum identity --------------------------------------------------------------------------

// Seeded random requests (1 B to 48 MiB, log-uniform) and frees on two streams, with other-stream
// uses, cache releases and peak resets, against a device that runs out now and then. After every
// step: the kinds and the live requested bytes add up to reserved memory exactly, now and at the
// peak, and agree with the allocator's own counters.
void check_identity(const std::string& conf, std::uint32_t seed, std::array<int, 4>& kinds_seen, std::int64_t& ooms) {
  SCOPED_TRACE("conf '" + conf + "' seed " + std::to_string(seed));
  SimulatedAllocator a(256 * kMiB, conf);
  if (conf.find("garbage_collection") != std::string::npos) a.allocator.set_memory_fraction(0.8);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> log_size(0.0, std::log(48.0 * kMiB));
  std::vector<Block*> live;
  for (int step = 0; step < 1500; ++step) {
    const unsigned roll = rng() % 100;
    if (roll < 52 || live.empty()) {
      const auto bytes = static_cast<std::size_t>(std::exp(log_size(rng)));
      try {
        Block* b = a.allocator.allocate(bytes, stream(1 + static_cast<int>(rng() % 2)));
        if (rng() % 10 == 0) a.allocator.record_stream(b, stream(3));
        live.push_back(b);
      } catch (const OutOfMemoryError&) {
        // The identity must hold after a failure too.
      }
    } else if (roll < 97) {
      const std::size_t i = rng() % live.size();
      a.allocator.free(live[i]);
      live[i] = live.back();
      live.pop_back();
    } else if (roll < 98) {
      a.backend->complete_stream_work(stream(3));
    } else if (roll < 99) {
      a.allocator.empty_cache();
    } else {
      a.allocator.reset_peak_memory_stats();
    }
    const WasteSplit now = a.allocator.waste();
    const WasteSplit peak = a.allocator.waste_at_peak();
    const DeviceStats stats = a.allocator.stats();
    const bool adds_up = now.requested + now.wasted() == now.reserved &&
                         static_cast<std::int64_t>(now.reserved) == stats.reserved_bytes[StatType::All].current &&
                         static_cast<std::int64_t>(now.requested) == stats.requested_bytes[StatType::All].current &&
                         peak.requested + peak.wasted() == peak.reserved &&
                         static_cast<std::int64_t>(peak.reserved) == stats.reserved_bytes[StatType::All].peak;
    EXPECT_TRUE(adds_up) << "step " << step << ": now " << now.requested << " + " << now.wasted() << " vs "
                         << now.reserved << " (counter " << stats.reserved_bytes[StatType::All].current << "); at peak "
                         << peak.requested << " + " << peak.wasted() << " vs " << peak.reserved;
    if (!adds_up) break;  // once is enough; the blocks are still freed below
    kinds_seen[0] += now.rounding != 0;
    kinds_seen[1] += now.holes.all() != 0;
    kinds_seen[2] += now.free_segments.all() != 0;
    kinds_seen[3] += now.mapped_unused != 0;
  }
  ooms += a.allocator.stats().num_ooms;
  for (Block* b : live) a.allocator.free(b);
  a.backend->complete_stream_work(stream(3));
  a.allocator.empty_cache();
  const WasteSplit end = a.allocator.waste();
  EXPECT_EQ(end.reserved, 0u);
  EXPECT_EQ(end.wasted(), 0u);
}

TEST(WasteSplit, AddsUpToReservedUnderEverySetting) {
  for (const char* conf : {"", "max_split_size_mb:40", "roundup_power2_divisions:4",
                           "roundup_power2_divisions:[1:2,4:8,>:16]", "expandable_segments:True",
                           "garbage_collection_threshold:0.5", "max_split_size_mb:64,roundup_power2_divisions:8"})
    for (std::uint32_t seed : {1u, 2u}) {
      std::array<int, 4> kinds_seen{};
      std::int64_t ooms = 0;
      check_identity(conf, seed, kinds_seen, ooms);
      // The sequence exercises what it is meant to: every kind the setting can make, and failures.
      const bool expandable = std::string(conf).find("expandable") != std::string::npos;
      EXPECT_TRUE(kinds_seen[0] > 0 && kinds_seen[1] > 0) << conf;
      EXPECT_TRUE(expandable ? kinds_seen[3] > 0 : kinds_seen[2] > 0) << conf;
      EXPECT_TRUE(ooms > 0) << conf;
    }
}

TEST(WasteSplit, AddsUpWithoutCaching) {
  AllocatorConfig config;
  config.caching = false;
  CachingAllocator allocator(std::make_unique<SimulatedBackend>(kGiB), config);
  Block* x = allocator.allocate(1000);
  Block* y = allocator.allocate(3 * kMiB + 1);
  const WasteSplit w = allocator.waste();
  EXPECT_EQ(w.requested, 3 * kMiB + 1001);
  EXPECT_EQ(w.rounding, 24u + 511u);  // each segment is its request rounded to 512 B
  EXPECT_EQ(w.requested + w.wasted(), w.reserved);
  allocator.free(x);
  allocator.free(y);
  EXPECT_EQ(allocator.waste().reserved, 0u);
}

// ---- the out-of-memory message -----------------------------------------------------------------

TEST(WasteSplit, OutOfMemoryWithHolesNamesExpandableSegments) {
  SimulatedAllocator a(100 * kMiB);
  std::vector<Block*> blocks;
  for (int i = 0; i < 50; ++i) blocks.push_back(a.allocator.allocate(2 * kMiB));
  for (std::size_t i = 0; i < blocks.size(); i += 2) a.allocator.free(blocks[i]);
  const std::string message = oom_message(a.allocator, 4 * kMiB);
  EXPECT_TRUE(contains(message, "holds 50.00 MiB requested by live tensors and 50.00 MiB of waste")) << message;
  EXPECT_TRUE(contains(message, "holes between live blocks 50.00 MiB (large pool 50.00 MiB, small pool 0 B)")) << message;
  EXPECT_TRUE(contains(message, "The largest kind is holes.")) << message;
  EXPECT_TRUE(contains(message, "expandable_segments:True")) << message;
  EXPECT_TRUE(contains(message, "Setting max_split_size_mb")) << message;
  EXPECT_FALSE(contains(message, "roundup_power2_divisions")) << message;
  for (std::size_t i = 1; i < blocks.size(); i += 2) a.allocator.free(blocks[i]);
}

TEST(WasteSplit, OutOfMemoryNeverSuggestsASettingThatIsOn) {
  SimulatedAllocator a(20 * kMiB, "expandable_segments:True");
  std::vector<Block*> blocks;  // ten 2 MiB blocks map the whole device; every other one freed
  for (int i = 0; i < 10; ++i) blocks.push_back(a.allocator.allocate(2 * kMiB));
  for (std::size_t i = 0; i < blocks.size(); i += 2) a.allocator.free(blocks[i]);
  const std::string message = oom_message(a.allocator, 4 * kMiB);
  EXPECT_TRUE(contains(message, "holes between live blocks 10.00 MiB")) << message;
  EXPECT_TRUE(contains(message, "The largest kind is holes.")) << message;
  EXPECT_FALSE(contains(message, "expandable_segments:True")) << message;
  EXPECT_FALSE(contains(message, "max_split_size_mb")) << message;
  for (std::size_t i = 1; i < blocks.size(); i += 2) a.allocator.free(blocks[i]);
}

TEST(WasteSplit, OutOfMemoryFromRoundingNamesTheDivisions) {
  SimulatedAllocator a(20 * kMiB, "roundup_power2_divisions:2");
  Block* held = a.allocator.allocate(8 * kMiB + 1);  // rounds to 12 MiB: 4 MiB - 1 B of rounding
  // 9 MiB rounds to 12 MiB too; 8 MiB are free on the device, and 4 MiB more would be without the rounding.
  const std::string message = oom_message(a.allocator, 9 * kMiB);
  EXPECT_TRUE(contains(message, "The largest kind is rounding.")) << message;
  EXPECT_TRUE(contains(message, "roundup_power2_divisions (at most 2 steps")) << message;
  EXPECT_FALSE(contains(message, "expandable_segments:True")) << message;
  a.allocator.free(held);
}

TEST(WasteSplit, OutOfMemoryWithFreeSegmentsOfAHeldPrivatePool) {
  SimulatedAllocator a(60 * kMiB);
  const auto pool = a.allocator.create_private_pool();
  a.allocator.begin_allocate_to_pool(pool, stream(5));
  a.allocator.free(a.allocator.allocate(30 * kMiB, stream(5)));  // the pool's segment, free but held
  a.allocator.end_allocate_to_pool(pool);
  Block* held = a.allocator.allocate(20 * kMiB);
  const std::string message = oom_message(a.allocator, 20 * kMiB);
  EXPECT_TRUE(contains(message, "free segments 30.00 MiB (30.00 MiB of another pool or stream)")) << message;
  EXPECT_TRUE(contains(message, "The largest kind is free segments.")) << message;
  EXPECT_TRUE(contains(message, "release_private_pool()")) << message;
  a.allocator.free(held);
  a.allocator.release_private_pool(pool);
}

TEST(WasteSplit, OutOfMemoryWithoutWasteAdvisesASmallerLoad) {
  SimulatedAllocator a(100 * kMiB, "expandable_segments:True");
  Block* held = a.allocator.allocate(60 * kMiB);
  const std::string message = oom_message(a.allocator, 60 * kMiB);
  EXPECT_TRUE(contains(message, "0 B of waste")) << message;
  EXPECT_TRUE(contains(message, "Reduce the batch size")) << message;
  EXPECT_FALSE(contains(message, "The largest kind")) << message;
  a.allocator.free(held);
}

// ---- memory_summary() --------------------------------------------------------------------------

TEST(WasteSplit, MemorySummaryShowsTheSplitBelowPyTorchsTable) {
  SimulatedAllocator a(kGiB);
  Block* x = a.allocator.allocate(10 * kMiB);
  Block* y = a.allocator.allocate(2 * kMiB);
  a.allocator.free(y);
  const std::string summary = a.allocator.memory_summary();
  const std::size_t table_end = summary.find("| Oversize segments");
  const std::size_t section = summary.find("Reserved memory by use");
  ASSERT_NE(table_end, std::string::npos) << summary;
  ASSERT_NE(section, std::string::npos) << summary;
  EXPECT_TRUE(section > table_end) << summary;
  // Now: 10 MiB requested and a 20 MiB free segment; at the peak: 12 MiB requested, an 18 MiB hole.
  EXPECT_EQ(line_starting(summary, "| Requested by tensors"),
            "| Requested by tensors  |  10240 KiB |  12288 KiB | live blocks asked for   |");
  EXPECT_EQ(line_starting(summary, "| Holes "), "| Holes                 |      0 KiB |  18432 KiB | free, in live segments  |");
  EXPECT_EQ(line_starting(summary, "| Free segments"),
            "| Free segments         |  20480 KiB |      0 KiB | no live block in them   |");
  EXPECT_EQ(line_starting(summary, "| Reserved memory       |  30720 KiB |  30720 KiB | the sum"),
            "| Reserved memory       |  30720 KiB |  30720 KiB | the sum of the above    |");
  a.allocator.free(x);
}
