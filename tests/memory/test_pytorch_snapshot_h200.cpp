// Real PyTorch 2.11 snapshots (tests/data/pytorch_snapshots, recorded on the H200): every one is
// read and converted, and replaying it under its recorded setting gives PyTorch's own peak
// allocated bytes (torch.cuda.memory_stats()) where sublet's rules already agree with PyTorch's
// (the table in that folder's README; the rest waits for issue 18's --rules pytorch).
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "memory/pytorch_snapshot.h"
#include "memory/replay.h"

namespace sublet::memory {
namespace {

const std::string kDir = std::string(SUBLET_SOURCE_DIR) + "/tests/data/pytorch_snapshots/";

TEST(PytorchSnapshotH200, EverySnapshotReplaysAndTheAgreeingOnesGivePyTorchsPeakAllocated) {
  const std::set<std::string> exact = {"resnet18_fp32_default",    "resnet18_fp32_div4",       "resnet18_fp32_expandable",
                                       "resnet18_fp32_maxsplit128", "resnet18_bf16_expandable", "resnet50_fp32_expandable",
                                       "resnet50_fp32_maxsplit128"};
  int replayed = 0;
  for (const char* model : {"resnet18_fp32", "resnet18_bf16", "resnet50_fp32"}) {
    for (const char* setting : {"default", "div4", "expandable", "maxsplit128"}) {
      const std::string name = std::string(model) + "_" + setting;
      SCOPED_TRACE(name);
      std::ifstream stats_file(kDir + name + ".json");
      ASSERT_TRUE(stats_file) << "missing " << name << ".json";
      const nlohmann::json recorded = nlohmann::json::parse(stats_file);
      const PytorchSnapshotTrace trace = load_pytorch_snapshot(kDir + name + ".pickle.gz", 0);
      ASSERT_GT(trace.events.size(), 100u);
      const ReplayResult r = replay_trace(trace.events, recorded["alloc_conf"].get<std::string>(), std::size_t{1} << 40);
      ASSERT_FALSE(r.out_of_memory) << r.oom_message;
      const auto pytorch_peak = recorded["memory_stats"]["allocated_bytes.all.peak"].get<std::size_t>();
      std::cout << "[ snapshot ] " << name << ": PyTorch peak allocated " << pytorch_peak << ", replay " << r.peak_allocated
                << "\n";
      if (exact.contains(name)) EXPECT_EQ(r.peak_allocated, pytorch_peak);
      ++replayed;
    }
  }
  EXPECT_EQ(replayed, 12);
}

}  // namespace
}  // namespace sublet::memory
