// memory/alloc_conf_sweep: the settings a sweep tries, and each row's figures read from the
// allocator's memory_stats() on the simulated backend, in cases whose figures are known.
#include <gtest/gtest.h>

#include "alloc_test_support.h"
#include "core/errors.h"
#include "memory/alloc_conf_sweep.h"
#include "analysis/pytorch_rules.h"
#include "memory/registry.h"
#include "analysis/replay.h"

using namespace sublet::memory;
using sublet::memory::testing::SimulatedAllocator;

namespace {

TEST(AllocConfSweep, TheStandardListCoversPytorchsKnobsAndBothDefaults) {
  const std::vector<SweepSetting> cpu = default_sweep_settings(sublet::Device::cpu());
  std::vector<std::string> labels, texts;
  for (const auto& s : cpu) {
    labels.push_back(s.label);
    texts.push_back(s.config.to_string());
  }
  EXPECT_EQ(labels, (std::vector<std::string>{"pytorch", "max_split_size_mb:512", "roundup_power2_divisions:16",
                                              "max_split_size_mb:512,roundup_power2_divisions:16",
                                              "expandable_segments:True", "sublet"}));
  EXPECT_EQ(texts[0], "");  // PyTorch's defaults: fixed segments, no knob set
  EXPECT_EQ(cpu[1].config.max_split_size, 512 * kMiB);
  EXPECT_EQ(cpu[2].config.divisions_for(64 * kMiB), 16u);
  EXPECT_EQ(cpu[3].config.max_split_size, 512 * kMiB);
  EXPECT_EQ(cpu[3].config.divisions_for(64 * kMiB), 16u);
  EXPECT_TRUE(cpu[4].config.expandable_segments);
  // sublet's defaults are the device's: expandable segments, on the CPU as on CUDA.
  EXPECT_EQ(texts[5], default_config(sublet::Device::cpu()).to_string());
  EXPECT_EQ(default_sweep_settings(sublet::Device::cuda(0)).back().config.expandable_segments, true);
}

TEST(AllocConfSweep, AGivenListIsSplitOnSemicolonsAndAppliedToPytorchsDefaults) {
  const auto settings = parse_sweep_settings(" expandable_segments:True ; max_split_size_mb:64,roundup_power2_divisions:4;sublet",
                                             sublet::Device::cpu());
  ASSERT_EQ(settings.size(), 3u);
  EXPECT_EQ(settings[0].label, "expandable_segments:True");
  EXPECT_TRUE(settings[0].config.expandable_segments);
  EXPECT_EQ(settings[1].config.max_split_size, 64 * kMiB);
  EXPECT_EQ(settings[1].config.divisions_for(2 * kMiB), 4u);
  EXPECT_FALSE(settings[1].config.expandable_segments);
  EXPECT_EQ(settings[2].label, "sublet");
  EXPECT_EQ(parse_sweep_settings("", sublet::Device::cpu()).size(), 6u);
  try {
    parse_sweep_settings("pytorch;max_split_size_mb:8", sublet::Device::cpu());
    ADD_FAILURE() << "a max_split_size_mb of 8 was accepted";
  } catch (const sublet::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--alloc-conf-sweep: bad value '8' for max_split_size_mb"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_sweep_settings("pytorch;;sublet", sublet::Device::cpu()), sublet::ConfigError);
}

// A 10 MiB block takes its own segment; a 2 MiB one then takes a 20 MiB segment of which 18 MiB
// stay free: the reserved peak (30 MiB) holds 12 MiB allocated, so 18 MiB are unallocated there.
TEST(AllocConfSweep, RowFiguresAreTheAllocatorsStatistics) {
  SimulatedAllocator a(1024 * kMiB);
  Block* big = a.allocator.allocate(10 * kMiB);
  Block* small = a.allocator.allocate(2 * kMiB);
  a.allocator.free(small);
  a.allocator.free(big);
  const auto stats = a.allocator.memory_stats();
  const SweepRow row = sweep_row_from_stats("pytorch", "", stats);
  EXPECT_EQ(row.peak_allocated, std::int64_t{12 * kMiB});
  EXPECT_EQ(row.peak_reserved, std::int64_t{30 * kMiB});
  EXPECT_DOUBLE_EQ(row.reserved_per_allocated(), 2.5);
  ASSERT_TRUE(row.unallocated_at_peak.has_value());
  EXPECT_EQ(*row.unallocated_at_peak, std::int64_t{18 * kMiB});
  EXPECT_EQ(row.segments_created, 2);
  EXPECT_EQ(row.device_allocs, 2);
  EXPECT_EQ(row.retries, 0);
  EXPECT_EQ(row.ooms, 0);
  EXPECT_EQ(row.peak_allocated, stats.at("allocated_bytes.all.peak"));
  EXPECT_EQ(row.peak_reserved, stats.at("reserved_bytes.all.peak"));
  EXPECT_EQ(row.segments_created, stats.at("segment.all.allocated"));
  EXPECT_EQ(row.device_allocs, stats.at("num_device_alloc"));
  EXPECT_FALSE(row.us_per_sample.has_value());
}

// The same requests in one expandable segment: one segment, the 2 MiB block placed right after
// the 10 MiB one, so nothing reserved lies outside a block at the peak.
TEST(AllocConfSweep, ExpandableSegmentsLeaveNoHoleInTheSameCase) {
  SimulatedAllocator a(1024 * kMiB, "expandable_segments:True");
  Block* big = a.allocator.allocate(10 * kMiB);
  Block* small = a.allocator.allocate(2 * kMiB);
  a.allocator.free(small);
  a.allocator.free(big);
  const SweepRow row = sweep_row_from_stats("expandable_segments:True", "expandable_segments:True", a.allocator.memory_stats());
  EXPECT_EQ(row.peak_reserved, std::int64_t{12 * kMiB});
  EXPECT_EQ(*row.unallocated_at_peak, 0);
  EXPECT_EQ(row.segments_created, 1);
}

// A cached small-pool segment (2 MiB, freed) beside a new 10 MiB segment for a large request: at
// the reserved peak (12 MiB) the free segment is what is reserved and unallocated.
TEST(AllocConfSweep, AFreeSegmentAtThePeakCountsAsUnallocated) {
  SimulatedAllocator a(1024 * kMiB);
  a.allocator.free(a.allocator.allocate(4096));
  Block* big = a.allocator.allocate(10 * kMiB);
  const SweepRow row = sweep_row_from_stats("pytorch", "", a.allocator.memory_stats());
  EXPECT_EQ(row.peak_reserved, std::int64_t{12 * kMiB});
  EXPECT_EQ(*row.unallocated_at_peak, std::int64_t{2 * kMiB});
  a.allocator.free(big);
}

// An expandable segment maps whole 2 MiB pages: 3 MiB asked for maps 4 MiB, 1 MiB of it unused.
TEST(AllocConfSweep, MappedButUnusedBytesAtThePeakCountAsUnallocated) {
  SimulatedAllocator a(1024 * kMiB, "expandable_segments:True");
  Block* b = a.allocator.allocate(3 * kMiB);
  const SweepRow row = sweep_row_from_stats("expandable_segments:True", "expandable_segments:True", a.allocator.memory_stats());
  EXPECT_EQ(row.peak_reserved, std::int64_t{4 * kMiB});
  EXPECT_EQ(*row.unallocated_at_peak, std::int64_t{1 * kMiB});
  a.allocator.free(b);
}

// A request that does not fit after the cache is released: one retry, one OOM.
TEST(AllocConfSweep, RetriesAndOutOfMemoryAreCounted) {
  SimulatedAllocator a(24 * kMiB);
  Block* big = a.allocator.allocate(12 * kMiB);
  EXPECT_THROW(a.allocator.allocate(14 * kMiB), sublet::OutOfMemoryError);
  const SweepRow row = sweep_row_from_stats("pytorch", "", a.allocator.memory_stats());
  EXPECT_EQ(row.ooms, 1);
  EXPECT_EQ(row.retries, 1);
  a.allocator.free(big);
}

TEST(AllocConfSweep, AMissingKeyIsNamed) {
  std::map<std::string, std::int64_t> stats = SimulatedAllocator(64 * kMiB).allocator.memory_stats();
  stats.erase("num_ooms");
  try {
    sweep_row_from_stats("x", "", stats);
    ADD_FAILURE() << "no error without num_ooms";
  } catch (const sublet::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no key num_ooms"), std::string::npos) << e.what();
  }
}

// Both replay rule sets give the sweep's columns; in this trace PyTorch's and sublet's
// allocators agree (the case above), including the unallocated bytes at the peak.
TEST(AllocConfSweep, ReplaysFillTheSameColumnsUnderBothRules) {
  using Action = TraceEvent::Action;
  const std::vector<TraceEvent> trace = {{.action = Action::Alloc, .id = 1, .size = 10 * kMiB},
                                         {.action = Action::Alloc, .id = 2, .size = 2 * kMiB},
                                         {.action = Action::Free, .id = 2},
                                         {.action = Action::Free, .id = 1}};
  const ReplayResult sublet_rules = replay_trace(trace, "", 1024 * kMiB);
  EXPECT_EQ(sublet_rules.sweep.peak_reserved, std::int64_t{30 * kMiB});
  EXPECT_EQ(sublet_rules.sweep.unallocated_at_peak, std::int64_t{18 * kMiB});
  EXPECT_EQ(sublet_rules.sweep.segments_created, 2);
  EXPECT_EQ(sublet_rules.sweep.device_allocs, sublet_rules.device_allocs);
  const ReplayResult pytorch_rules = replay_trace_pytorch(trace, "", 1024 * kMiB);
  EXPECT_EQ(pytorch_rules.sweep.peak_allocated, std::int64_t{12 * kMiB});
  EXPECT_EQ(pytorch_rules.sweep.peak_reserved, std::int64_t{30 * kMiB});
  EXPECT_EQ(pytorch_rules.sweep.unallocated_at_peak, std::int64_t{18 * kMiB});
  EXPECT_EQ(pytorch_rules.sweep.segments_created, 2);
  EXPECT_EQ(pytorch_rules.sweep.ooms, 0);
}

}  // namespace
