// Recomputation under a memory budget on a ResNet (models/resnet_recompute.h), on the CPU:
//  - recomputed runs of blocks (nn::Sequential::set_recompute_runs) give the plain model's
//    gradients bit for bit, and leave the state dict's names alone;
//  - the measurement touches neither parameters nor batch-norm statistics and leaves no gradients;
//  - fit_memory_budget's choice keeps the measured peak within the budget, below the plain peak,
//    and the peak model's prediction is close to the measured peak;
//  - an unreachable budget is refused before training with the smallest peak reachable;
//  - under autocast (bfloat16 activations) the fit measures the 16-bit step and still keeps its
//    peak within the budget (budgets work with mixed precision).
#include <gtest/gtest.h>

#include "core/errors.h"
#include "memory/registry.h"
#include "models/registry.h"
#include "models/resnet_recompute.h"
#include "runtime/autocast.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"

namespace sublet::models {
namespace {

std::shared_ptr<ResNet> resnet20() {
  auto model = std::dynamic_pointer_cast<ResNet>(create_model("resnet20", {.in_channels = 1, .num_classes = 10, .seed = 4}));
  model->train();
  return model;
}

struct Batch {
  Tensor images, labels;
};
Batch batch(std::int64_t n) {
  Generator g(9);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 10);
  return {randn({n, 1, 28, 28}, g), Tensor::from_vector(labels, {n})};
}

std::vector<std::vector<float>> gradients(ResNet& model, const Batch& b) {
  for (Tensor& p : model.parameters()) p.set_grad(Tensor());
  nn::functional::cross_entropy(model(b.images), b.labels).backward();
  std::vector<std::vector<float>> out;
  for (const Tensor& p : model.parameters()) out.push_back(p.grad().to_vector<float>());
  return out;
}

std::vector<std::vector<float>> values(const std::vector<Tensor>& tensors) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : tensors) out.push_back(t.to(DType::Float32).to_vector<float>());
  return out;
}

TEST(ResNetRecompute, RecomputedRunsGiveThePlainGradientsBitForBit) {
  const Batch b = batch(8);
  auto plain = resnet20();
  auto recomputed = resnet20();
  const auto names = recomputed->named_parameters();
  // The stem (unit 0) and runs of one, two and three blocks in every stage (resnet20: 3 stages of
  // 3 blocks, units 1-9), the three-block one nested (each block recomputed again inside).
  apply_recompute(*recomputed, {{0, 1}, {1, 2}, {2, 4}, {4, 7, true}, {8, 9}});
  EXPECT_TRUE(recomputed->recompute_stem());
  EXPECT_EQ(recomputed->stages[0]->recompute_runs(), (std::vector<nn::Sequential::Run>{{0, 1}, {1, 3}}));
  EXPECT_EQ(recomputed->stages[1]->recompute_runs(), (std::vector<nn::Sequential::Run>{{0, 3}}));
  EXPECT_EQ(recomputed->stages[1]->recompute_nested(), (std::vector<bool>{true}));
  EXPECT_EQ(recomputed->stages[2]->recompute_runs(), (std::vector<nn::Sequential::Run>{{1, 2}}));
  EXPECT_EQ(recomputed->stages[0]->recompute_nested(), (std::vector<bool>{false, false}));
  const auto expected = gradients(*plain, b);
  const auto got = gradients(*recomputed, b);
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "parameter " << i;
  EXPECT_EQ(describe_runs(measure_blocks(*recomputed, b.images, b.labels, 0).units,
                          {{0, 1}, {1, 2}, {2, 4}, {4, 7, true}, {8, 9}}),
            "stem, layer1.0, layer1.1-layer1.2, [layer2.0-layer2.2], layer3.1");
  EXPECT_EQ(values(recomputed->buffers()), values(plain->buffers())) << "running statistics updated once";
  const auto names_after = recomputed->named_parameters();
  ASSERT_EQ(names_after.size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(names_after[i].first, names[i].first);
}

TEST(ResNetRecompute, RunsAcrossStagesOrOutOfOrderAreRefused) {
  auto model = resnet20();
  EXPECT_THROW(apply_recompute(*model, {{3, 5}}), ValueError);  // crosses stages 1 and 2
  EXPECT_THROW(apply_recompute(*model, {{0, 2}}), ValueError);  // the stem and a block
  EXPECT_THROW(apply_recompute(*model, {{2, 2}}), ValueError);
  EXPECT_THROW(apply_recompute(*model, {{2, 3, true}}), ValueError);  // nested needs two blocks
  EXPECT_THROW(model->stages[0]->set_recompute_runs({{1, 2}, {0, 1}}), ValueError);
  EXPECT_THROW(model->stages[0]->set_recompute_runs({{0, 4}}), ValueError);
}

TEST(ResNetRecompute, MeasurementLeavesTheModelAsItWas) {
  const Batch b = batch(16);
  auto model = resnet20();
  const auto params = values(model->parameters());
  const auto buffers = values(model->buffers());
  const BlockMeasurement m = measure_blocks(*model, b.images, b.labels, 1000);
  EXPECT_EQ(values(model->parameters()), params);
  EXPECT_EQ(values(model->buffers()), buffers);
  for (const Tensor& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
  ASSERT_EQ(m.units.size(), 10u);
  EXPECT_EQ(m.units[0].name, "stem");
  EXPECT_EQ(m.units[1].name, "layer1.0");
  EXPECT_EQ(m.units[9].group, 3);
  for (const auto& u : m.units) {
    EXPECT_GT(u.retained_bytes, u.output_bytes) << u.name << ": a block saves more than its output";
    EXPECT_GE(u.forward_ms, 0.0) << u.name;
    // Its backward holds its activations and the gradient of its output at least.
    EXPECT_GE(u.backward_bytes, u.retained_bytes + u.output_bytes) << u.name;
  }
  ASSERT_EQ(m.parameter_gradient_bytes.size(), m.units.size());
  std::size_t parameters = 0;
  for (const Tensor& p : model->parameters()) parameters += static_cast<std::size_t>(p.nbytes());
  EXPECT_EQ(m.parameter_gradient_bytes.front(), parameters) << "the stem's backward comes last: every gradient exists";
  // Parameters, buffers and batch, + optimizer state (and the measurement's copy of the buffers).
  const std::size_t fixed = memory_allocated(Device::cpu()) + 1000;
  EXPECT_GE(m.fixed_bytes, fixed);
  EXPECT_LE(m.fixed_bytes, fixed + 64 * 1024);
  EXPECT_EQ(m.units[0].output_bytes, 16u * 16 * 28 * 28 * 4);
  EXPECT_EQ(m.units[1].output_bytes, 16u * 16 * 28 * 28 * 4);
  EXPECT_GT(m.baseline_peak, 1000u);
}

TEST(ResNetRecompute, TheChoiceFitsTheBudgetAndAnUnreachableOneIsRefused) {
  const Batch b = batch(32);
  auto model = resnet20();
  const std::size_t plain_peak = measure_step_peak(*model, b.images, b.labels, 0);
  const RecomputeReport r = fit_memory_budget(*model, memory::parse_memory_budget("0.6"), b.images, b.labels, 0);
  EXPECT_EQ(r.budget_bytes, static_cast<std::size_t>(0.6 * static_cast<double>(r.baseline_peak)));
  EXPECT_FALSE(r.runs.empty());
  EXPECT_LE(r.measured_peak, r.budget_bytes) << r.summary();
  EXPECT_LT(r.measured_peak, plain_peak);
  EXPECT_EQ(measure_step_peak(*model, b.images, b.labels, 0), r.measured_peak) << "the choice stays applied";
  // The peak model follows the step: its prediction is within 5% of the measured peak.
  EXPECT_NEAR(static_cast<double>(r.predicted_peak), static_cast<double>(r.measured_peak),
              0.05 * static_cast<double>(r.measured_peak)) << r.summary();

  auto other = resnet20();
  try {
    fit_memory_budget(*other, memory::parse_memory_budget("0.05"), b.images, b.labels, 0);
    ADD_FAILURE() << "a budget of 5% of the peak was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("smallest peak reachable"), std::string::npos) << e.what();
  }
  for (const auto& stage : other->stages) EXPECT_TRUE(stage->recompute_runs().empty()) << "nothing left applied";
  EXPECT_FALSE(other->recompute_stem());
}

TEST(ResNetRecompute, UnderAutocastTheSixteenBitStepFitsItsBudget) {
  const Batch b = batch(32);
  auto model = resnet20();
  const std::size_t fp32_peak = measure_step_peak(*model, b.images, b.labels, 0);
  AutocastGuard autocast(DType::BFloat16);
  const std::size_t bf16_peak = measure_step_peak(*model, b.images, b.labels, 0);
  // bfloat16 activations: the plain 16-bit step holds clearly less than the float32 one.
  EXPECT_LT(bf16_peak, fp32_peak * 3 / 4) << bf16_peak << " vs " << fp32_peak;
  const RecomputeReport r = fit_memory_budget(*model, memory::parse_memory_budget("0.6"), b.images, b.labels, 0);
  // The budget's fraction is of the 16-bit step's peak (within the weight-cast copies, which the
  // autocast cache makes anew after each measured backward).
  EXPECT_NEAR(static_cast<double>(r.baseline_peak), static_cast<double>(bf16_peak), 0.02 * static_cast<double>(bf16_peak));
  EXPECT_FALSE(r.runs.empty());
  EXPECT_LE(r.measured_peak, r.budget_bytes) << r.summary();
  EXPECT_EQ(measure_step_peak(*model, b.images, b.labels, 0), r.measured_peak) << "the choice stays applied";
}

TEST(ResNetRecompute, UnitsJsonRoundTripsAndBackwardBytesMayBeAbsent) {
  const std::vector<memory::RecomputeUnit> units = {
      {.name = "stem", .group = 0, .retained_bytes = 30, .output_bytes = 10, .forward_ms = 1.5, .backward_bytes = 55},
      {.name = "layer1.0", .group = 1, .retained_bytes = 40, .output_bytes = 10, .forward_ms = 2}};
  const auto back = units_from_json(units_json(units));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].backward_bytes, 55u);
  EXPECT_EQ(back[1].backward_bytes, 0u);
  nlohmann::json old = units_json(units);
  old[0].erase("backward_bytes");  // files written before it was measured
  EXPECT_EQ(units_from_json(old)[0].backward_bytes, 0u);
  EXPECT_EQ(memory::unit_backward_bytes(units_from_json(old)[0]), 50u) << "estimated: retained + 2 * output";
  old[1]["backward_bytes"] = "many";
  EXPECT_THROW(units_from_json(old), ValueError);
}

// A device too small for the unbudgeted step (the case a budget is for): the host allocator is
// capped below that step's peak, the blocks are measured on half the batch and scaled up, and the
// budgeted step fits under both the budget and the cap.
TEST(ResNetRecompute, BlocksAreMeasuredOnPartOfTheBatchWhenTheWholeStepDoesNotFit) {
  const Batch b = batch(64);
  auto model = resnet20();
  memory::CachingAllocator& host = memory::allocator_for(Device::cpu());
  const std::size_t plain_peak = measure_step_peak(*model, b.images, b.labels, 0);
  empty_cache(Device::cpu());
  const std::size_t cap = memory_allocated(Device::cpu()) + plain_peak * 3 / 4;
  host.set_memory_fraction(static_cast<double>(cap) / static_cast<double>(host.backend().memory_info().total_bytes));
  struct Uncap {
    memory::CachingAllocator& a;
    ~Uncap() { a.set_memory_fraction(1.0); }
  } uncap{host};
  EXPECT_THROW(measure_step_peak(*model, b.images, b.labels, 0), OutOfMemoryError) << "the cap must bite";
  empty_cache(Device::cpu());
  const RecomputeReport r =
      fit_memory_budget(*model, memory::parse_memory_budget(std::to_string(plain_peak / 2) + "B"), b.images, b.labels, 0);
  EXPECT_GT(r.measured_on_fraction, 1) << r.summary();
  EXPECT_LE(r.measured_peak, r.budget_bytes) << r.summary();
  EXPECT_NE(r.summary().find("scaled up"), std::string::npos);
  // The scaled estimate of the unbudgeted peak is close to the one measured without the cap.
  EXPECT_NEAR(static_cast<double>(r.baseline_peak), static_cast<double>(plain_peak), 0.15 * static_cast<double>(plain_peak));
}

}  // namespace
}  // namespace sublet::models
