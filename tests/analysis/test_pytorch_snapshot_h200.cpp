// Real PyTorch 2.11 snapshots (tests/data/pytorch_snapshots, recorded on the H200): every one is
// read and converted. Replayed under its recorded setting, it gives PyTorch's own peak allocated
// bytes (torch.cuda.memory_stats()) where sublet's rules agree with PyTorch's; replayed as PyTorch
// ran it (with_recorded_releases), its peak reserved bytes on every snapshot with fixed segments,
// and all three figures on four of them (the table in that folder's README). Under PyTorch's own
// rules (analysis/pytorch_rules.h, `sublet replay --rules pytorch`) the recorded run gives all three
// figures on all twelve, expandable segments included.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "analysis/pytorch_rules.h"
#include "analysis/pytorch_snapshot.h"
#include "analysis/replay.h"

namespace sublet::memory {
namespace {

const std::string kDir = std::string(SUBLET_SOURCE_DIR) + "/tests/data/pytorch_snapshots/";

// Calls body(name, setting, recorded, trace) for each of the 12 snapshots: `recorded` is NAME.json
// (the setting and memory_stats()), `trace` the snapshot read for device 0. Stops the test at a
// missing file (a fatal failure in here ends the loop; the caller's test then ends).
template <typename Body>
void for_each_snapshot(Body&& body) {
  for (const char* model : {"resnet18_fp32", "resnet18_bf16", "resnet50_fp32"}) {
    for (const char* setting : {"default", "div4", "expandable", "maxsplit128"}) {
      const std::string name = std::string(model) + "_" + setting;
      SCOPED_TRACE(name);
      std::ifstream stats_file(kDir + name + ".json");
      ASSERT_TRUE(stats_file) << "missing " << name << ".json";
      const nlohmann::json recorded = nlohmann::json::parse(stats_file);
      const PytorchSnapshotTrace trace = load_pytorch_snapshot(kDir + name + ".pickle.gz", 0);
      body(name, std::string(setting), recorded, trace);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(PytorchSnapshotH200, EverySnapshotReplaysAndItsRecordedRunGivesPyTorchsOwnFigures) {
  const std::set<std::string> exact = {"resnet18_fp32_default",    "resnet18_fp32_div4",       "resnet18_fp32_expandable",
                                       "resnet18_fp32_maxsplit128", "resnet18_bf16_expandable", "resnet50_fp32_expandable",
                                       "resnet50_fp32_maxsplit128"};
  const std::set<std::string> all_three = {"resnet18_fp32_div4", "resnet50_fp32_default", "resnet50_fp32_div4",
                                           "resnet50_fp32_maxsplit128"};
  int replayed = 0;
  for_each_snapshot([&](const std::string& name, const std::string& setting, const nlohmann::json& recorded,
                        const PytorchSnapshotTrace& trace) {
    ASSERT_GT(trace.events.size(), 100u);
    const ReplayResult r = replay_trace(trace.events, recorded["alloc_conf"].get<std::string>(), std::size_t{1} << 40);
    ASSERT_FALSE(r.out_of_memory) << r.oom_message;
    const auto pytorch_peak = recorded["memory_stats"]["allocated_bytes.all.peak"].get<std::size_t>();
    std::cout << "[ snapshot ] " << name << ": PyTorch peak allocated " << pytorch_peak << ", replay " << r.peak_allocated
              << "\n";
    if (exact.contains(name)) EXPECT_EQ(r.peak_allocated, pytorch_peak);
    ++replayed;

    // The run as PyTorch made it (its cache releases inside allocations kept): peak reserved
    // exact on every snapshot with fixed segments; all three figures on the four below.
    const ReplayResult run = replay_trace(with_recorded_releases(trace), recorded["alloc_conf"].get<std::string>(),
                                          std::size_t{1} << 40);
    const auto& stats = recorded["memory_stats"];
    std::cout << "[ recorded ] " << name << ": reserved " << stats["reserved_bytes.all.peak"] << " vs " << run.peak_reserved
              << ", device allocations " << stats["num_device_alloc"] << " vs " << run.device_allocs << "\n";
    if (setting != "expandable")
      EXPECT_EQ(run.peak_reserved, stats["reserved_bytes.all.peak"].get<std::size_t>());
    if (all_three.contains(name)) {
      EXPECT_EQ(run.peak_allocated, pytorch_peak);
      EXPECT_EQ(run.device_allocs, stats["num_device_alloc"].get<std::int64_t>());
    }
  });
  EXPECT_EQ(replayed, 12);
}

// --rules pytorch: the recorded run under PyTorch 2.11's own rules (analysis/pytorch_rules.h), with
// the recorded segment addresses, gives memory_stats()'s three figures byte for byte.
TEST(PytorchSnapshotH200, RecordedRunUnderPyTorchRulesGivesMemoryStatsExactly) {
  int exact_reserved = 0, exact_allocated = 0, exact_device_allocs = 0;
  for_each_snapshot([&](const std::string& name, const std::string& setting, const nlohmann::json& recorded,
                        const PytorchSnapshotTrace& trace) {
    const auto& stats = recorded["memory_stats"];
    // Fixed segments are cudaMalloc'ed; expandable ones are reserved and mapped, one per stream and
    // pool: these runs use one stream, so one small and one large segment.
    if (setting == "expandable") {
      EXPECT_TRUE(trace.segments.device_allocs.empty());
      EXPECT_EQ(trace.segments.expandable_bases.size(), 2u);
    } else {
      EXPECT_TRUE(trace.segments.expandable_bases.empty());
      EXPECT_FALSE(trace.segments.device_allocs.empty());
    }
    std::cout << "[ segments ] " << name << ": " << trace.segments.device_allocs.size() << " cudaMalloc, "
              << trace.segments.expandable_bases.size() << " expandable segments\n";
    const ReplayResult run = replay_trace_pytorch(with_recorded_releases(trace), trace.alloc_conf, std::size_t{1} << 40,
                                                  &trace.segments);
    ASSERT_FALSE(run.out_of_memory) << run.oom_message;
    EXPECT_EQ(run.rules, "pytorch");
    std::cout << "[ pytorch  ] " << name << ": reserved " << stats["reserved_bytes.all.peak"] << " vs " << run.peak_reserved
              << ", allocated " << stats["allocated_bytes.all.peak"] << " vs " << run.peak_allocated
              << ", device allocations " << stats["num_device_alloc"] << " vs " << run.device_allocs << "\n";
    EXPECT_EQ(run.peak_reserved, stats["reserved_bytes.all.peak"].get<std::size_t>());
    EXPECT_EQ(run.peak_allocated, stats["allocated_bytes.all.peak"].get<std::size_t>());
    EXPECT_EQ(run.device_allocs, stats["num_device_alloc"].get<std::int64_t>());
    exact_reserved += run.peak_reserved == stats["reserved_bytes.all.peak"].get<std::size_t>();
    exact_allocated += run.peak_allocated == stats["allocated_bytes.all.peak"].get<std::size_t>();
    exact_device_allocs += run.device_allocs == stats["num_device_alloc"].get<std::int64_t>();
  });
  std::cout << "[ pytorch  ] exact of 12: peak reserved " << exact_reserved << ", peak allocated " << exact_allocated
            << ", device allocations " << exact_device_allocs << "\n";
}

}  // namespace
}  // namespace sublet::memory
