// Channels-last on the CPU: convolution, batch norm (+ add + ReLU) and pooling given
// channels-last inputs and parameters give the NCHW results forward and backward (the CPU has no
// NHWC kernels: the functionals convert once and run NCHW), gradients reach channels-last
// parameters channels-last, a ResNet converted with Module::to(ChannelsLast) trains step for
// step as the NCHW one, and a checkpoint of a channels-last model loads into either layout.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>

#include "channels_last_support.h"
#include "runtime/nn/functional.h"
#include "train/checkpoint.h"

namespace sublet {
namespace {

using testing::max_abs_diff;
constexpr MemoryFormat kCL = MemoryFormat::ChannelsLast;

Tensor random(const Shape& sizes, std::uint64_t seed, bool requires_grad = true) {
  Generator g(seed);
  return randn(sizes, g, TensorOptions().dtype(DType::Float64).requires_grad(requires_grad));
}

// `a` detached, converted to channels-last, a leaf again.
// (1-D tensors: a detached copy.)
Tensor cl_leaf(const Tensor& a) {
  return (a.dim() == 4 ? a.detach().to(kCL) : a.detach().clone()).requires_grad_(a.requires_grad());
}

constexpr double kTol = 1e-10;  // float64, the same kernels on the same values: rounding only

TEST(ChannelsLastCpu, Conv2dMatchesNchwForwardAndBackward) {
  const Tensor x = random({2, 4, 7, 6}, 1), w = random({6, 2, 3, 3}, 2), b = random({6}, 3);
  const Tensor xc = cl_leaf(x), wc = cl_leaf(w), bc = cl_leaf(b);
  const auto opts = nn::functional::Conv2dFuncOptions().stride(2).padding(1).groups(2);
  const Tensor up = random({2, 6, 4, 3}, 4, false);
  const Tensor y = nn::functional::conv2d(x, w, b, opts);
  const Tensor yc = nn::functional::conv2d(xc, wc, bc, opts);
  EXPECT_LE(max_abs_diff(y, yc), kTol);
  (y * up).sum().backward();
  (yc * up).sum().backward();
  EXPECT_LE(max_abs_diff(x.grad(), xc.grad()), kTol);
  EXPECT_LE(max_abs_diff(w.grad(), wc.grad()), kTol);
  EXPECT_LE(max_abs_diff(b.grad(), bc.grad()), kTol);
  // A channels-last parameter (and input leaf) gets its gradient channels-last, as PyTorch.
  EXPECT_TRUE(wc.grad().is_contiguous(kCL)) << shape_str(wc.grad().strides());
  EXPECT_TRUE(xc.grad().is_contiguous(kCL));
  EXPECT_TRUE(w.grad().is_contiguous());
}

Tensor positive(const Shape& sizes, std::uint64_t seed) {
  Generator g(seed);
  return rand(sizes, g, DType::Float64) + 0.5;
}

TEST(ChannelsLastCpu, BatchNormMatchesNchwInTrainingAndEval) {
  for (const bool training : {true, false}) {
    const Tensor x = random({3, 4, 5, 5}, 5), w = random({4}, 6), b = random({4}, 7);
    const Tensor xc = cl_leaf(x), wc = cl_leaf(w), bc = cl_leaf(b);
    const Tensor mean = random({4}, 8, false), var = positive({4}, 9);
    const Tensor mean_c = mean.clone(), var_c = var.clone();
    const Tensor up = random({3, 4, 5, 5}, 10, false);
    const Tensor y = nn::functional::batch_norm(x, mean, var, w, b, training, 0.1, 1e-5);
    const Tensor yc = nn::functional::batch_norm(xc, mean_c, var_c, wc, bc, training, 0.1, 1e-5);
    EXPECT_LE(max_abs_diff(y, yc), kTol) << training;
    EXPECT_LE(max_abs_diff(mean, mean_c), kTol);
    EXPECT_LE(max_abs_diff(var, var_c), kTol);
    (y * up).sum().backward();
    (yc * up).sum().backward();
    EXPECT_LE(max_abs_diff(x.grad(), xc.grad()), kTol) << training;
    EXPECT_LE(max_abs_diff(w.grad(), wc.grad()), kTol) << training;
    EXPECT_LE(max_abs_diff(b.grad(), bc.grad()), kTol) << training;
    EXPECT_TRUE(xc.grad().is_contiguous(kCL));
  }
}

TEST(ChannelsLastCpu, BatchNormAddReluMatchesNchw) {
  const Tensor x = random({2, 3, 4, 4}, 11), r = random({2, 3, 4, 4}, 12), w = random({3}, 13), b = random({3}, 14);
  const Tensor xc = cl_leaf(x), rc = cl_leaf(r), wc = cl_leaf(w), bc = cl_leaf(b);
  const Tensor mean = zeros({3}, DType::Float64), var = ones({3}, DType::Float64);
  const Tensor mean_c = mean.clone(), var_c = var.clone();
  const Tensor up = random({2, 3, 4, 4}, 15, false);
  const Tensor y = nn::functional::batch_norm_relu(x, r, mean, var, w, b, true);
  const Tensor yc = nn::functional::batch_norm_relu(xc, rc, mean_c, var_c, wc, bc, true);
  EXPECT_LE(max_abs_diff(y, yc), kTol);
  (y * up).sum().backward();
  (yc * up).sum().backward();
  for (const auto& [a, c] : {std::pair{x, xc}, std::pair{r, rc}, std::pair{w, wc}, std::pair{b, bc}}) {
    EXPECT_LE(max_abs_diff(a.grad(), c.grad()), kTol);
  }
  EXPECT_TRUE(rc.grad().is_contiguous(kCL));
}

TEST(ChannelsLastCpu, PoolingMatchesNchwForwardAndBackward) {
  namespace F = nn::functional;
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> op;
  };
  const Case cases[] = {
      {"max_pool2d", [](const Tensor& t) { return F::max_pool2d(t, F::MaxPool2dFuncOptions(3).stride(2).padding(1)); }},
      {"avg_pool2d", [](const Tensor& t) { return F::avg_pool2d(t, F::AvgPool2dFuncOptions(2)); }},
      {"adaptive_avg_pool2d", [](const Tensor& t) { return F::adaptive_avg_pool2d(t, {1, 1}); }},
      {"adaptive_avg_pool2d 3x2", [](const Tensor& t) { return F::adaptive_avg_pool2d(t, {3, 2}); }},
  };
  for (const Case& c : cases) {
    const Tensor x = random({2, 3, 6, 6}, 16);
    const Tensor xc = cl_leaf(x);
    const Tensor y = c.op(x), yc = c.op(xc);
    EXPECT_LE(max_abs_diff(y, yc), kTol) << c.name;
    const Tensor up = random(y.sizes(), 17, false);
    (y * up).sum().backward();
    (yc * up).sum().backward();
    EXPECT_LE(max_abs_diff(x.grad(), xc.grad()), kTol) << c.name;
    EXPECT_TRUE(xc.grad().is_contiguous(kCL)) << c.name;
  }
  // Flatten after global pooling works whatever layout the pooling returned.
  const Tensor pooled = F::adaptive_avg_pool2d(random({2, 3, 4, 4}, 18).contiguous(kCL), {1, 1});
  EXPECT_EQ(pooled.flatten(1).sizes(), (Shape{2, 3}));
}

TEST(ChannelsLastCpu, ResNetTrainsStepForStepAsNchw) {
  int checked = 0;
  const testing::StepLosses losses =
      testing::channels_last_steps("resnet20", Device::cpu(), 3, [&](nn::Module& model) {
        for (const auto& [name, p] : model.named_parameters()) {
          if (p.dim() != 4) continue;
          ++checked;
          EXPECT_EQ(p.suggest_memory_format(), kCL) << name;
          ASSERT_TRUE(p.grad().defined()) << name;
          EXPECT_TRUE(p.grad().is_contiguous(kCL)) << name << " " << shape_str(p.grad().strides());
        }
      });
  EXPECT_GT(checked, 0);
  ASSERT_EQ(losses.nchw.size(), 3u);
  for (std::size_t i = 0; i < losses.nchw.size(); ++i) {
    // float32, the same kernels after one layout conversion: summation order may differ.
    EXPECT_LE(std::abs(losses.nchw[i] - losses.channels_last[i]), 1e-4 * std::abs(losses.nchw[i])) << "step " << i;
  }
  EXPECT_NE(losses.nchw[0], losses.nchw[2]);  // the steps did train
}

TEST(ChannelsLastCpu, CheckpointStoresLogicalTensorsThatLoadIntoEitherLayout) {
  const models::ModelOptions options{.in_channels = 3, .num_classes = 10, .seed = 3};
  auto source = models::create_model("resnet20", options);
  source->to(kCL);
  train::Checkpoint checkpoint;
  checkpoint.identity.model = "resnet20";
  checkpoint.position.train_images = 8;
  checkpoint.position.batch_size = 8;
  checkpoint.model_state = source->state_dict();
  const auto path = std::filesystem::temp_directory_path() / ("sublet_channels_last_" + std::to_string(::getpid()) + ".ckpt");
  train::save_checkpoint(path, checkpoint);
  const train::Checkpoint loaded = train::load_checkpoint(path);
  std::filesystem::remove(path);

  auto into_nchw = models::create_model("resnet20", {.in_channels = 3, .num_classes = 10, .seed = 4});
  auto into_cl = models::create_model("resnet20", {.in_channels = 3, .num_classes = 10, .seed = 4});
  into_cl->to(kCL);
  into_nchw->load_state_dict(loaded.model_state);
  into_cl->load_state_dict(loaded.model_state);
  const auto expected = source->state_dict();
  const auto got_nchw = into_nchw->state_dict();
  const auto got_cl = into_cl->state_dict();
  ASSERT_EQ(expected.size(), got_nchw.size());
  int four_d = 0;
  std::map<std::string, Tensor> stored_by_name(loaded.model_state.begin(), loaded.model_state.end());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(stored_by_name.count(expected[i].first), 1u) << expected[i].first;
    const Tensor& stored = stored_by_name.at(expected[i].first);
    EXPECT_TRUE(stored.is_contiguous()) << expected[i].first;  // the logical tensor, row-major
    EXPECT_EQ(max_abs_diff(expected[i].second, stored), 0.0) << expected[i].first;
    EXPECT_EQ(max_abs_diff(expected[i].second, got_nchw[i].second), 0.0) << expected[i].first;
    EXPECT_EQ(max_abs_diff(expected[i].second, got_cl[i].second), 0.0) << expected[i].first;
    if (expected[i].second.dim() == 4) {
      ++four_d;
      EXPECT_TRUE(got_nchw[i].second.is_contiguous());
      EXPECT_EQ(got_cl[i].second.suggest_memory_format(), kCL) << expected[i].first;
    }
  }
  EXPECT_GT(four_d, 0);
}

}  // namespace
}  // namespace sublet
