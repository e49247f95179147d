// The layer table of profiled ResNet-20 steps on the CPU: the peaks are consistent with each other
// and with the allocator's own peak statistics, and the spans cover every allocation of a step.
#include <gtest/gtest.h>

#include <set>

#include "models/registry.h"
#include "models/resnet_recompute.h"
#include "profile/layer_rows.h"
#include "profile/profile_session.h"

namespace sublet::profile {
namespace {

const ProfileRun& resnet_run() {
  static const ProfileRun run = [] {
    ProfileOptions o;
    o.model_name = "resnet20";
    o.batch_size = 4;
    o.input_shape = {3, 16, 16};
    o.steps = 3;
    o.timing_steps = 1;
    return profile_training([] { return models::create_model("resnet20", {.num_classes = 10, .seed = 3}); }, o);
  }();
  return run;
}

TEST(LayerRows, StepPeaksMatchTheAllocatorsPeakStatistics) {
  const ProfileRun& run = resnet_run();
  const auto peaks = step_peaks(run);
  ASSERT_EQ(peaks.size(), 3u);
  for (std::size_t i = 0; i < peaks.size(); ++i) {
    EXPECT_EQ(peaks[i].peak_allocated, static_cast<std::int64_t>(run.steps[i].live_peak_allocated)) << "step " << i + 1;
    EXPECT_EQ(peaks[i].peak_reserved, static_cast<std::int64_t>(run.steps[i].live_peak_reserved)) << "step " << i + 1;
  }
}

TEST(LayerRows, PerLayerPeaksStayBelowTheStepPeakAndTheMarkedRowsReachIt) {
  const ProfileRun& run = resnet_run();
  const auto rows = layer_rows(run);
  const auto peaks = step_peaks(run);
  ASSERT_GT(rows.size(), 3u * 2u * 20u);  // fwd and bwd of 20+ modules per step
  for (const StepPeak& p : peaks) {
    int marked = 0, marked_leaves = 0;
    for (const LayerRow& r : rows) {
      if (r.step != p.step) continue;
      EXPECT_LE(r.peak(), p.peak_allocated) << r.module << " " << phase_name(r.phase);
      EXPECT_GE(r.peak_above_entry, 0);
      if (r.holds_step_peak) {
        ++marked;
        if (r.is_leaf) ++marked_leaves;
        EXPECT_EQ(r.peak(), p.peak_allocated) << r.module;
        EXPECT_TRUE(r.begin_event <= p.peak_event && p.peak_event < r.end_event) << r.module;
      } else {
        // Not marked: no allocation inside reaches the peak.
        for (std::uint64_t i = r.begin_event; i < r.end_event; ++i) {
          if (run.events[i].kind == memory::AllocatorEventKind::Alloc) {
            ASSERT_LT(run.accounting.allocated[i], p.peak_allocated) << r.module;
          }
        }
      }
    }
    // The peak happens in one leaf span (a layer, or the loss/input/optimizer) and the spans around it.
    EXPECT_GE(marked, 1) << "step " << p.step;
    EXPECT_EQ(marked_leaves, 1) << "step " << p.step;
  }
}

TEST(LayerRows, EveryAllocationOfAStepIsInsideATopLevelSpan) {
  const ProfileRun& run = resnet_run();
  const auto rows = layer_rows(run);
  for (const StepRecord& s : run.steps) {
    std::int64_t allocated_in_top_spans = 0, allocated_in_step = 0;
    for (const LayerRow& r : rows)
      if (r.step == s.step && r.depth == 0) allocated_in_top_spans += r.bytes_allocated;
    for (std::uint64_t i = s.begin_event; i < s.end_event; ++i)
      if (run.events[i].kind == memory::AllocatorEventKind::Alloc) allocated_in_step += static_cast<std::int64_t>(run.events[i].size);
    EXPECT_EQ(allocated_in_top_spans, allocated_in_step) << "step " << s.step;
  }
}

TEST(LayerRows, RowFiguresAgreeWithTheAllocatorAndAddUp) {
  const ProfileRun& run = resnet_run();
  const auto rows = layer_rows(run);
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const LayerRow& r = rows[k];
    const Span& s = run.spans[k];
    EXPECT_EQ(r.allocated_at_entry, static_cast<std::int64_t>(s.allocated_at_entry)) << r.module;
    EXPECT_EQ(r.allocated_at_exit, static_cast<std::int64_t>(s.allocated_at_exit)) << r.module;
    EXPECT_EQ(r.net, r.bytes_allocated - r.bytes_freed) << r.module;
    std::int64_t by_category = 0;
    for (auto v : r.net_by_category) by_category += v;
    EXPECT_EQ(by_category, r.net) << r.module;
    EXPECT_EQ(r.reserved_change, static_cast<std::int64_t>(s.reserved_at_exit) - static_cast<std::int64_t>(s.reserved_at_entry));
  }
  // Steady state: step 1 builds the cache, step 2 may still grow it (the optimizer state made in
  // step 1 now lives through the forward), from step 3 on every block comes from the cache.
  std::int64_t first_step_device_allocs = 0;
  for (const LayerRow& r : rows) {
    if (r.step == 1 && r.depth == 0) first_step_device_allocs += r.device_allocs;
    if (r.step >= 3) {
      EXPECT_EQ(r.device_allocs, 0) << r.module << " step " << r.step;
    }
  }
  EXPECT_GT(first_step_device_allocs, 0);
}

TEST(LayerRows, ResidualBlocksHaveForwardAndBackwardRows) {
  const ProfileRun& run = resnet_run();
  std::set<std::pair<std::string, std::string>> seen;
  for (const LayerRow& r : layer_rows(run)) seen.insert({r.module, phase_name(r.phase)});
  for (const char* module : {"resnet20", "conv1", "layer1.0", "layer1.0.conv1", "layer3.2.bn2", "fc"}) {
    EXPECT_TRUE(seen.count({module, "fwd"})) << module;
    EXPECT_TRUE(seen.count({module, "bwd"})) << module;
  }
  for (const char* pseudo : {"(input)", "(loss)"}) EXPECT_TRUE(seen.count({pseudo, "fwd"})) << pseudo;
  EXPECT_TRUE(seen.count({"(loss)", "bwd"}));
  EXPECT_TRUE(seen.count({"(optimizer.step)", "optimizer"}));
  EXPECT_TRUE(seen.count({"(optimizer.zero_grad)", "optimizer"}));
}

// Recomputed blocks (models/resnet_recompute.h, as --memory-budget sets them): their forward runs
// again inside backward, as rows of phase Recompute, once per recomputed module and step.
TEST(LayerRows, RecomputedBlocksHaveRecomputeRowsInsideBackward) {
  ProfileOptions o;
  o.model_name = "resnet20";
  o.batch_size = 4;
  o.input_shape = {3, 16, 16};
  o.steps = 2;
  o.timing_steps = 0;
  const ProfileRun run = profile_training(
      [] {
        auto model = models::create_model("resnet20", {.num_classes = 10, .seed = 3});
        models::apply_recompute(dynamic_cast<models::ResNet&>(*model), {{1, 3}});  // layer1.0 and layer1.1
        return model;
      },
      o);
  std::set<std::string> recomputed;
  for (const LayerRow& r : layer_rows(run)) {
    if (r.phase != Phase::Recompute) continue;
    recomputed.insert(r.module);
    EXPECT_TRUE(r.module.rfind("layer1.0", 0) == 0 || r.module.rfind("layer1.1", 0) == 0) << r.module;
  }
  EXPECT_TRUE(recomputed.contains("layer1.0")) << "the run's first block";
  EXPECT_TRUE(recomputed.contains("layer1.1.conv1")) << "a module inside the run";
  EXPECT_FALSE(recomputed.contains("layer1.2"));
  EXPECT_STREQ(phase_name(Phase::Recompute), "recompute");
}

}  // namespace
}  // namespace sublet::profile
