// Optimizer::backward_and_step on the GPU: in a captured training step the update of each group
// of parameters starts during backward, on the update lane (ops/concurrent.h), and the values
// are those of backward(); step():
//  - a small MLP whose middle weight is used twice (its gradient is final only after both uses;
//    an update launched after the first would read half of it) trains the same with the
//    overlapped graphed step as with the plain graphed step: parameters within 1e-6 after 8
//    steps, where reading a partial gradient (or the gradients before backward wrote them) moves
//    a parameter by about lr x gradient, 1e-3 here; the same kernels run on both sides, so the
//    two normally agree exactly. SGD with momentum and Adam;
//  - ResNet-20 in channels-last (convolutions, batch norm, channels-last gradients) follows the
//    eager loss sequence (1e-4 relative: cuDNN may use atomics) with updates launched during
//    backward;
//  - the same ResNet-20, graphed with and without the overlap: parameters within 1e-6 (the
//    update must wait for the weight gradients convolutions finish beside backward,
//    runtime/step/scheduler.h);
//  - eager, nothing overlaps (0 parameters during backward) and the step is step()'s.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>

#include "graph_training_support.h"
#include "memory/current_stream.h"
#include "runtime/autograd/function.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/kernel_args.h"
#include "runtime/step/graphed_train_step.h"
#include "runtime/optim/adam.h"
#include "runtime/optim/sgd.h"
#include "tests/gpu_skip.h"
#include "tests/nan_safe_max.h"

namespace sublet {
namespace {

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

constexpr int kSteps = 8;
constexpr int kWarmup = 2;
const Shape kFeatures{32, 8};

// in (8) -> 256 -> 256 (the same weight twice) -> 10; about 70k parameters in 5 tensors. The update
// goes out in groups of an eighth of the bytes: the last layer's and the middle weight during
// backward, the first layer's (2,304 values, reported last) after it.
struct TiedMlp {
  std::vector<Tensor> params;  // w_in, b_in, w_mid, w_out, b_out

  TiedMlp(Device device, std::uint64_t seed) {
    Generator g(seed);
    for (const Shape& s : std::vector<Shape>{{256, 8}, {256}, {256, 256}, {10, 256}, {10}}) {
      Tensor p = (randn(s, g) * 0.1).to(device);
      p.requires_grad_(true);
      params.push_back(p);
    }
  }
  Tensor loss(const Tensor& x, const Tensor& labels) const {
    Tensor h = (x.matmul(params[0].t()) + params[1]).relu();
    h = h.matmul(params[2].t()).relu();
    h = h.matmul(params[2].t()).relu();  // the tied use
    return nn::functional::cross_entropy(h.matmul(params[3].t()) + params[4], labels);
  }
};

struct MlpRun {
  std::vector<Tensor> params;
  std::vector<std::size_t> during_backward;  // per step, as backward_and_step reported
};

MlpRun train_mlp(bool overlapped, const MakeOptimizer& make) {
  const Device gpu = Device::cuda(0);
  TiedMlp mlp(gpu, 5);
  auto optimizer = make(mlp.params);
  const auto batches = testing::random_batches(kSteps, kFeatures, 10, 7);
  MlpRun run;
  GraphedTrainStep graphed(
      [&](const Tensor& x, const Tensor& y) {
        optimizer->zero_grad();
        Tensor loss = mlp.loss(x, y);
        if (overlapped) {
          run.during_backward.push_back(optimizer->backward_and_step([&] { loss.backward(); }));
        } else {
          loss.backward();
          optimizer->step();
        }
        return loss;
      },
      *optimizer, kFeatures, Shape{kFeatures[0]}, gpu, kWarmup);
  for (int step = 0; step < kSteps; ++step) {
    graphed.run(batches[step].first.to(gpu), batches[step].second.to(gpu)).item<float>();
  }
  EXPECT_TRUE(graphed.graphed());
  for (const Tensor& p : mlp.params) run.params.push_back(p.detach().to(Device::cpu()));
  return run;
}

void expect_overlap_changes_nothing(const MakeOptimizer& make, const char* name) {
  SUBLET_SKIP_WITHOUT_GPU("the update overlapping a captured backward");
  const MlpRun plain = train_mlp(false, make);
  const MlpRun overlapped = train_mlp(true, make);
  // Eager warm-up steps overlap nothing; the capture (the only later call: replays run no host
  // code) launches some parameters' updates during backward, but not all: the first layer's
  // gradients come last and are updated after backward.
  ASSERT_EQ(overlapped.during_backward.size(), static_cast<std::size_t>(kWarmup + 1)) << name;
  for (int i = 0; i < kWarmup; ++i) EXPECT_EQ(overlapped.during_backward[i], 0u) << name << " eager step " << i;
  EXPECT_GT(overlapped.during_backward[kWarmup], 0u) << name << ": nothing was updated during the captured backward";
  EXPECT_LT(overlapped.during_backward[kWarmup], plain.params.size()) << name;
  for (std::size_t i = 0; i < plain.params.size(); ++i) {
    const std::vector<float> a = plain.params[i].to_vector<float>(), b = overlapped.params[i].to_vector<float>();
    float worst = 0;
    for (std::size_t k = 0; k < a.size(); ++k) worst = testing::nan_safe_max(worst, std::fabs(a[k] - b[k]));
    EXPECT_LE(worst, 1e-6f) << name << ": parameter " << i << " differs after " << kSteps << " steps";
  }
}

TEST(UpdateOverlap, SgdWithMomentumMatchesThePlainGraphedStep) {
  expect_overlap_changes_nothing(
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-4));
      },
      "SGD");
}

TEST(UpdateOverlap, AdamMatchesThePlainGraphedStep) {
  expect_overlap_changes_nothing(
      [](std::vector<Tensor> p) { return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions(1e-2)); },
      "Adam");
}

TEST(UpdateOverlap, ChannelsLastResNetFollowsTheEagerLosses) {
  SUBLET_SKIP_WITHOUT_GPU("the update overlapping a captured ResNet-20 backward");
  const Device gpu = Device::cuda(0);
  const Shape images{8, 3, 16, 16};
  const auto batches = testing::random_batches(kSteps, images, 10, 99);
  const auto train = [&](bool graphed) {
    auto model = testing::resnet20_on(gpu, 17);
    model->to(MemoryFormat::ChannelsLast);
    optim::SGD sgd(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    std::vector<float> losses;
    std::size_t during_backward = 0;
    const auto step = [&](const Tensor& x, const Tensor& y) {
      sgd.zero_grad();
      Tensor loss = nn::functional::cross_entropy((*model)(x), y);
      during_backward += sgd.backward_and_step([&] { loss.backward(); });
      return loss;
    };
    GraphedTrainStep graph(step, sgd, images, Shape{images[0]}, gpu, kWarmup, DType::Float32,
                           MemoryFormat::ChannelsLast);
    for (int i = 0; i < kSteps; ++i) {
      const Tensor x = batches[i].first.to(gpu).to(MemoryFormat::ChannelsLast), y = batches[i].second.to(gpu);
      losses.push_back((graphed ? graph.run(x, y) : step(x, y)).item<float>());
    }
    if (graphed) {
      EXPECT_GT(during_backward, 0u) << "no update overlapped the captured backward";
    } else {
      EXPECT_EQ(during_backward, 0u) << "eager steps must not fork";
    }
    return losses;
  };
  const std::vector<float> eager = train(false), graphed = train(true);
  for (int i = 0; i < kSteps; ++i) {
    const float tolerance = 1e-4f * std::fabs(eager[i]) + 1e-6f;
    EXPECT_LE(std::fabs(eager[i] - graphed[i]), tolerance) << "step " << i << ": " << eager[i] << " vs " << graphed[i];
  }
}

// ResNet-20 channels-last, graphed, with backward(); step() or backward_and_step(): the same kernels
// either way, but the overlapped update reads weight gradients that convolutions finish beside
// the rest of backward (runtime/step/scheduler.h): it must wait for them. Parameters within 1e-6.
std::vector<Tensor> train_resnet_graphed(bool overlapped) {
  const Device gpu = Device::cuda(0);
  const Shape images{8, 3, 16, 16};
  const auto batches = testing::random_batches(kSteps, images, 10, 99);
  auto model = testing::resnet20_on(gpu, 17);
  model->to(MemoryFormat::ChannelsLast);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  GraphedTrainStep graph(
      [&](const Tensor& x, const Tensor& y) {
        sgd.zero_grad();
        Tensor loss = nn::functional::cross_entropy((*model)(x), y);
        if (overlapped) {
          sgd.backward_and_step([&] { loss.backward(); });
        } else {
          loss.backward();
          sgd.step();
        }
        return loss;
      },
      sgd, images, Shape{images[0]}, gpu, kWarmup, DType::Float32, MemoryFormat::ChannelsLast);
  for (int i = 0; i < kSteps; ++i) {
    graph.run(batches[i].first.to(gpu).to(MemoryFormat::ChannelsLast), batches[i].second.to(gpu)).item<float>();
  }
  std::vector<Tensor> params;
  for (const Tensor& p : model->parameters()) params.push_back(p.detach().to(Device::cpu()).contiguous());
  return params;
}

TEST(UpdateOverlap, ChannelsLastResNetMatchesThePlainGraphedStep) {
  SUBLET_SKIP_WITHOUT_GPU("the update overlapping a captured ResNet-20 backward");
  const std::vector<Tensor> plain = train_resnet_graphed(false), overlapped = train_resnet_graphed(true);
  ASSERT_EQ(plain.size(), overlapped.size());
  for (std::size_t i = 0; i < plain.size(); ++i) {
    const std::vector<float> a = plain[i].to_vector<float>(), b = overlapped[i].to_vector<float>();
    float worst = 0;
    for (std::size_t k = 0; k < a.size(); ++k) worst = testing::nan_safe_max(worst, std::fabs(a[k] - b[k]));
    EXPECT_LE(worst, 1e-6f) << "parameter " << i << " differs after " << kSteps << " steps";
  }
}

// out = w * w * x, whose weight gradient 2 g w x is written by side work that first keeps its lane
// busy for about a millisecond (runtime/step/scheduler.h): the update, launched when backward
// reports the gradient final
// during backward, must wait for it. Read too early, it finds the previous replay's gradient
// (same buffer, another w), and w's trajectory moves by about lr x that difference.
Tensor square_times_slowly(const Tensor& w, const Tensor& x, Tensor& busy) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = w * w * x;
  }
  autograd::record("square_times_slowly", {w}, {out},
                   [w, x, &busy](const autograd::TensorList& grads, const autograd::BackwardContext& context) {
                     const Tensor g = grads[0];
                     Tensor grad_w;
                     autograd::BackwardPasses passes;
                     passes.main = [](const ops::Context&) {};
                     passes.side = [&](const ops::Context& c) {
                       grad_w = empty_like(w);  // on the capturing stream, as a convolution's weight gradient
                       memory::StreamGuard on_side(c.device, c.stream);
                       for (int i = 0; i < 24; ++i) busy.mul_(1.0);
                       grad_w.copy_(w);
                       grad_w.mul_(x);
                       grad_w.mul_(g);
                       grad_w.mul_(2.0);
                     };
                     passes.keep = {g};
                     passes.side_writes_only_leaves = true;
                     context.run_passes(sublet::detail::context_for(g), std::move(passes));
                     return autograd::TensorList{grad_w};
                   });
  return out;
}

std::vector<float> train_slow_gradient(bool overlapped, std::vector<std::size_t>& during_backward) {
  const Device gpu = Device::cuda(0);
  const auto options = TensorOptions().device(gpu);
  Generator g(3);
  Tensor w = (rand({1 << 16}, g) + 0.5).to(gpu);
  w.requires_grad_(true);
  const Tensor x = (rand({1 << 16}, g) + 0.5).to(gpu);
  Tensor busy = ones({1 << 24}, options);  // 64 MiB: each pass over it takes tens of microseconds
  optim::SGD sgd({w}, optim::SGDOptions(0.05));
  GraphedTrainStep graphed(
      [&](const Tensor& input, const Tensor&) {
        sgd.zero_grad();
        Tensor loss = square_times_slowly(w, input, busy).sum();
        if (overlapped) {
          during_backward.push_back(sgd.backward_and_step([&] { loss.backward(); }));
        } else {
          loss.backward();
          sgd.step();
        }
        return loss;
      },
      sgd, x.sizes(), Shape{1}, gpu, kWarmup);
  const Tensor label = zeros({1}, TensorOptions().dtype(DType::Int64).device(gpu));
  for (int step = 0; step < kSteps; ++step) graphed.run(x, label).item<float>();
  return w.detach().to(Device::cpu()).to_vector<float>();
}

TEST(UpdateOverlap, UpdateWaitsForGradientsStillWrittenBeside) {
  SUBLET_SKIP_WITHOUT_GPU("the update waiting for side work in a captured backward");
  std::vector<std::size_t> during_backward, unused;
  const std::vector<float> plain = train_slow_gradient(false, unused);
  const std::vector<float> overlapped = train_slow_gradient(true, during_backward);
  // Two eager warm-up steps, then the capture, whose update of w starts during backward.
  EXPECT_EQ(during_backward, (std::vector<std::size_t>{0, 0, 1}));
  ASSERT_EQ(plain.size(), overlapped.size());
  float worst = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) worst = testing::nan_safe_max(worst, std::fabs(plain[i] - overlapped[i]));
  EXPECT_LE(worst, 1e-6f);
}

}  // namespace
}  // namespace sublet
