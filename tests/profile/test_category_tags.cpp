// The history of a profiled step of a small perceptron, checked against the sizes of its tensors:
// every allocation has the category and the annotation (layer and phase) it should have.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "memory/annotation.h"
#include "memory/registry.h"
#include "profile/layer_rows.h"
#include "profile/profile_session.h"
#include "profile_test_util.h"

namespace sublet::profile {
namespace {

using memory::AllocatorEventKind;

// Batch 8 of 16 features, 4 classes, SGD with momentum, 2 steps.
ProfileRun profile_mlp(const std::string& optimizer = "sgd") {
  ProfileOptions o;
  o.model_name = "mlp";
  o.batch_size = 8;
  o.input_shape = {16, 1, 1};
  o.num_classes = 4;
  o.steps = 2;
  o.timing_steps = 1;
  o.optimizer = optimizer;
  return profile_training([] { return std::make_shared<testing::Mlp>(); }, o);
}

// Requested sizes of the allocations of `category` made in the span annotated `annotation`
// during step `step` (0: outside any step).
std::vector<std::size_t> allocations(const ProfileRun& run, int step, Category category, const std::string& annotation) {
  std::uint64_t begin = 0, end = run.steps.front().begin_event;
  if (step > 0) {
    begin = run.steps[static_cast<std::size_t>(step - 1)].begin_event;
    end = run.steps[static_cast<std::size_t>(step - 1)].end_event;
  }
  std::vector<std::size_t> sizes;
  for (std::uint64_t i = begin; i < end; ++i) {
    const auto& e = run.events[i];
    if (e.kind == AllocatorEventKind::Alloc && run.accounting.category[i] == category &&
        memory::annotation_name(e.annotation) == annotation)
      sizes.push_back(e.requested_size);
  }
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}

// Blocks alive in `segments` as (annotation, category name) -> sorted requested sizes.
std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> alive(const std::vector<memory::SegmentInfo>& segments) {
  std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> blocks;
  for (const auto& s : segments)
    for (const auto& b : s.blocks)
      if (b.state != memory::BlockInfo::State::Inactive)
        blocks[{memory::annotation_name(b.annotation), category_label(report_category(b.category))}].push_back(b.requested_size);
  for (auto& [key, sizes] : blocks) std::sort(sizes.begin(), sizes.end());
  return blocks;
}

const std::vector<std::size_t> kParameterSizes = {16, 128, 512, 2048};  // fc2.bias, fc1.bias, fc2.weight, fc1.weight

TEST(CategoryTags, ParametersAreTaggedWhenTheModelIsBuilt) {
  const ProfileRun run = profile_mlp();
  EXPECT_EQ(allocations(run, 0, Category::Parameter, "(setup)"), kParameterSizes);
  EXPECT_EQ(run.parameter_bytes, 2048u + 128u + 512u + 16u);
  EXPECT_EQ(run.parameter_count, 4u);
  // Every block is a multiple of 512 B: the 16- and 128-byte biases take 512 B each.
  EXPECT_EQ(run.parameter_block_bytes, 2048u + 512u + 512u + 512u);
}

TEST(CategoryTags, InputBatchAndLabels) {
  const ProfileRun run = profile_mlp();
  for (int step : {1, 2}) {
    // 8 x 16 float32 images and 8 int64 labels.
    EXPECT_EQ(allocations(run, step, Category::Input, "(input)/fwd"), (std::vector<std::size_t>{64, 512})) << "step " << step;
  }
}

TEST(CategoryTags, ActivationsSavedForBackwardAreTheReluOutputAndTheLogits) {
  const ProfileRun run = profile_mlp();
  for (int step : {1, 2}) {
    // relu saves its output (8 x 32 float32), which fc2's matmul saves too; cross_entropy saves
    // the logits (8 x 4), made by fc2's bias add. fc1's output feeds only relu: a temporary.
    EXPECT_EQ(allocations(run, step, Category::Activation, "relu/fwd"), (std::vector<std::size_t>{1024})) << "step " << step;
    EXPECT_EQ(allocations(run, step, Category::Activation, "fc2/fwd"), (std::vector<std::size_t>{128})) << "step " << step;
    EXPECT_TRUE(allocations(run, step, Category::Activation, "fc1/fwd").empty());
    EXPECT_FALSE(allocations(run, step, Category::Temporary, "fc1/fwd").empty());
  }
  // Live at the end of the model's forward: exactly those two among activations.
  const std::vector<LayerRow> rows = layer_rows(run);
  for (const LayerRow& r : rows) {
    if (r.module != "mlp" || r.phase != Phase::Forward) continue;
    EXPECT_EQ(run.accounting.live_by_category_at(r.end_event)[index_of(Category::Activation)], 1024 + 512) << "step " << r.step;
    EXPECT_EQ(r.net_by_category[index_of(Category::Activation)], 1024 + 512);
  }
}

TEST(CategoryTags, GradientsAreMadeInTheBackwardOfTheirLayer) {
  const ProfileRun run = profile_mlp();
  for (int step : {1, 2}) {
    // fc1.bias (32 floats) and fc1.weight once: matmul's backward makes the weight's gradient
    // g^T x row-major like the weight, and the engine keeps that product itself, with no copy.
    EXPECT_EQ(allocations(run, step, Category::Gradient, "fc1/bwd"), (std::vector<std::size_t>{128, 2048})) << "step " << step;
    // fc2: its bias (4 floats), its weight (4 x 32, once as above), and the gradient flowing on
    // to relu's output (8 x 32).
    EXPECT_EQ(allocations(run, step, Category::Gradient, "fc2/bwd"), (std::vector<std::size_t>{16, 512, 1024})) << "step " << step;
  }
  // After each step the gradients of the four parameters are alive, and nothing else of backward.
  for (const StepRecord& s : run.steps) {
    const auto blocks = alive(s.segments_at_end);
    const std::vector<std::size_t> fc1{128, 2048}, fc2{16, 512};
    EXPECT_EQ(blocks.at({"fc1/bwd", "gradient"}), fc1);
    EXPECT_EQ(blocks.at({"fc2/bwd", "gradient"}), fc2);
    EXPECT_EQ(blocks.count({"relu/bwd", "gradient"}), 0u);
  }
}

TEST(CategoryTags, OptimizerStateIsCreatedInTheFirstStep) {
  for (const auto& [optimizer, copies] : std::vector<std::pair<std::string, int>>{{"sgd", 1}, {"adam", 2}}) {
    const ProfileRun run = profile_mlp(optimizer);
    std::vector<std::size_t> expected;
    for (int i = 0; i < copies; ++i) expected.insert(expected.end(), kParameterSizes.begin(), kParameterSizes.end());
    std::sort(expected.begin(), expected.end());
    const auto first = allocations(run, 1, Category::OptimizerState, "(optimizer.step)/optimizer");
    EXPECT_TRUE(std::includes(first.begin(), first.end(), expected.begin(), expected.end())) << optimizer;
    EXPECT_TRUE(allocations(run, 2, Category::OptimizerState, "(optimizer.step)/optimizer").empty()) << optimizer;
    const auto blocks = alive(run.final_segments);
    auto state = blocks.at({"(optimizer.step)/optimizer", "optimizer_state"});
    EXPECT_TRUE(std::includes(state.begin(), state.end(), expected.begin(), expected.end())) << optimizer;
  }
}

TEST(CategoryTags, EveryAllocationOfAStepHasAScope) {
  const ProfileRun run = profile_mlp();
  for (const StepRecord& s : run.steps) {
    for (std::uint64_t i = s.begin_event; i < s.end_event; ++i) {
      if (run.events[i].kind == AllocatorEventKind::Alloc) {
        EXPECT_NE(run.events[i].annotation, 0u) << "allocation " << i << " of " << run.events[i].requested_size << " B";
      }
    }
  }
}

TEST(CategoryTags, HistoryTotalsMatchTheAllocatorAtEveryHook) {
  const ProfileRun run = profile_mlp();
  ASSERT_FALSE(run.spans.empty());
  for (const Span& s : run.spans) {
    EXPECT_EQ(run.accounting.allocated_at(s.begin_event), static_cast<std::int64_t>(s.allocated_at_entry)) << s.module;
    EXPECT_EQ(run.accounting.allocated_at(s.end_event), static_cast<std::int64_t>(s.allocated_at_exit)) << s.module;
    EXPECT_EQ(run.accounting.reserved_at(s.begin_event), static_cast<std::int64_t>(s.reserved_at_entry)) << s.module;
  }
  // Categories add up to the allocated total after every event.
  for (std::size_t i = 0; i < run.events.size(); ++i) {
    std::int64_t sum = 0;
    for (auto v : run.accounting.live_by_category[i]) sum += v;
    ASSERT_EQ(sum, run.accounting.allocated[i]) << "event " << i;
  }
}

}  // namespace
}  // namespace sublet::profile
