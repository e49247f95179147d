// The loss-scaled step on CUDA: the checks of grad_scaler_checks.h on the GPU (skip on inf and
// NaN bit for bit, a skipped first step, the 50-step scale sequence with growth and backoff, the
// device path against the host path, plain and scaled steps sharing the counts), and the whole
// scaled step (scale, backward, GradScaler::step with the fused kernels, update) captured into a
// CUDA graph by GraphedTrainStep: with inf injected through the static input at chosen steps,
// eager and graphed runs from the same start give bit-identical scales after every step and
// bit-identical parameters, optimizer state and step counts. Bit for bit holds because both runs
// launch the same deterministic kernels (sublet's CUDA reductions use no atomics) in the same order.
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <set>

#include "core/errors.h"
#include "grad_scaler_checks.h"
#include "runtime/step/cuda_graph.h"
#include "runtime/step/graphed_train_step.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

TEST(GradScalerCuda, InfOrNaNChangesNothingBitForBit) {
  SUBLET_SKIP_WITHOUT_GPU("the fused CUDA kernels skipping a step with an inf/NaN gradient");
  testing::skip_changes_nothing(Device::cuda(0));
}

TEST(GradScalerCuda, ASkippedFirstStepLeavesTheNextOneFirst) {
  SUBLET_SKIP_WITHOUT_GPU("a skipped first step on CUDA: the counts stay on the device");
  testing::skipped_first_step(Device::cuda(0));
}

TEST(GradScalerCuda, ScaleSequenceOver50StepsWithInjectedInf) {
  SUBLET_SKIP_WITHOUT_GPU("GradScaler growth and backoff over 50 CUDA steps");
  testing::scale_sequence(Device::cuda(0));
}

TEST(GradScalerCuda, MarkNonFiniteFlagsInfAndNaNInOneLaunch) {
  SUBLET_SKIP_WITHOUT_GPU("the one-launch inf/NaN check of GradScaler on CUDA");
  testing::mark_non_finite_flags(Device::cuda(0));
}

TEST(GradScalerCuda, DevicePathMatchesTheHostPath) {
  SUBLET_SKIP_WITHOUT_GPU("fused device-decided skip vs per-parameter host-read skip on CUDA");
  testing::device_matches_host_path(Device::cuda(0));
}

TEST(GradScalerCuda, PlainStepsAndScaledStepsShareTheCounts) {
  SUBLET_SKIP_WITHOUT_GPU("step counts advanced on the device, read back for plain steps");
  testing::plain_steps_continue_the_counts(Device::cuda(0));
}

constexpr int kSteps = 24;
// Of the flattened input: element 33000 of parameter 4's target (its second CUDA chunk).
constexpr std::int64_t kBadElement = 16 * 3 * 3 * 3 + 16 + 16 + 1 + 33000;
const std::set<int> kBadSteps = {0, 6, 7, 13, 20};  // 0: the first warm-up step; 2: the capture
const amp::GradScalerOptions kOptions{.init_scale = 1024.0, .growth_interval = 4};

struct ScaledRun {
  std::vector<double> scales;  // after every step's update
  testing::Snapshot state;
};

// loss = sum_k mean((p_k - x_k)^2) with x the static input (every parameter's target, flattened):
// deterministic, and inf when an input element is inf, the injection a replay can take.
ScaledRun scaled_training(bool graphed, const testing::MakeScaledOptimizer& make) {
  const Device gpu = Device::cuda(0);
  auto params = testing::make_params(testing::fused_test_shapes(), DType::Float32, gpu, 31);
  auto optimizer = make(params, true);
  amp::GradScaler scaler(gpu, kOptions);
  std::int64_t total = 0;
  for (const Tensor& p : params) total += p.numel();
  const auto step = [&](const Tensor& x, const Tensor&) {
    optimizer->zero_grad();  // first: the gradients are allocated inside the capture
    Tensor loss;
    std::int64_t offset = 0;
    for (const Tensor& p : params) {
      const Tensor d = p - x.narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
      const Tensor term = (d * d).mean();
      loss = loss.defined() ? loss + term : term;
    }
    scaler.scale(loss).backward();
    scaler.step(*optimizer);
    scaler.update();
    return loss;
  };
  std::unique_ptr<GraphedTrainStep> graph;
  if (graphed) graph = std::make_unique<GraphedTrainStep>(step, *optimizer, Shape{total}, Shape{1}, gpu, 2);
  const Tensor labels = zeros({1}, TensorOptions().dtype(DType::Int64).device(gpu));
  ScaledRun run;
  for (int i = 0; i < kSteps; ++i) {
    Generator g(700 + static_cast<std::uint64_t>(i));
    Tensor input = randn({total}, g);
    if (kBadSteps.count(i)) input.data<float>()[kBadElement] = std::numeric_limits<float>::infinity();
    input = input.to(gpu);
    if (graphed) {
      graph->run(input, labels);
    } else {
      step(input, labels);
    }
    run.scales.push_back(scaler.current_scale());
  }
  if (graphed) {
    EXPECT_TRUE(graph->graphed());
    EXPECT_EQ(graph->steps(), kSteps);
  }
  run.state = testing::snapshot(*optimizer);
  return run;
}

void expect_graph_matches_eager(const testing::ScaledCase& c) {
  SCOPED_TRACE(c.name);
  const ScaledRun eager = scaled_training(false, c.make);
  const ScaledRun graphed = scaled_training(true, c.make);
  EXPECT_EQ(eager.scales, testing::expected_scales(kOptions, kSteps, kBadSteps));
  EXPECT_EQ(graphed.scales, eager.scales);
  EXPECT_EQ(testing::first_difference(graphed.state, eager.state), "");
  const auto taken = static_cast<std::int64_t>(kSteps - static_cast<int>(kBadSteps.size()));
  EXPECT_EQ(testing::count_of(graphed.state, "step_count"), taken);
  EXPECT_EQ(testing::count_of(graphed.state, "4.step"), taken);
}

TEST(GradScalerCuda, GraphedScaledStepMatchesEagerBitForBitSgd) {
  SUBLET_SKIP_WITHOUT_GPU("a loss-scaled SGD step captured into a CUDA graph vs eager");
  expect_graph_matches_eager(testing::scaled_cases()[0]);
}

TEST(GradScalerCuda, GraphedScaledStepMatchesEagerBitForBitAdamW) {
  SUBLET_SKIP_WITHOUT_GPU("a loss-scaled AdamW step captured into a CUDA graph vs eager");
  expect_graph_matches_eager(testing::scaled_cases()[3]);
}

TEST(GradScalerCuda, CapturingAScaledStepWithoutTheFusedUpdateIsRefused) {
  // The per-parameter path would read the flag on the host: the capture must fail with a reason.
  SUBLET_SKIP_WITHOUT_GPU("capture of a loss-scaled step with a per-parameter optimizer");
  const Device gpu = Device::cuda(0);
  auto params = testing::make_params({{8}}, DType::Float32, gpu, 3);
  optim::SGD sgd(params, optim::SGDOptions(0.1).fused(false));
  amp::GradScaler scaler(gpu);
  testing::set_scaled_grads(params, 4, 65536.0);
  EXPECT_EQ(scaler.step(sgd), optim::StepOutcome::Stepped);  // eager: read on the host
  scaler.update();
  CudaGraph graph(gpu);
  try {
    graph.capture([&] { (void)scaler.step(sgd); });
    ADD_FAILURE() << "the capture should have thrown";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fused update"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(graph.captured());
  EXPECT_EQ(sgd.step_count(), 1);
}

}  // namespace
}  // namespace sublet
