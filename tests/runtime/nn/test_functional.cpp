// runtime/nn/functional: every differentiable function checked by Tensor-level float64
// gradcheck (central finite differences, error <= 1e-6 as defined in runtime/gradcheck.h),
// plus the behaviour the wrappers add over the kernels: strided inputs, defaults, running
// statistics, dropout reproducibility, argument errors.
#include "runtime/nn/functional.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ops/batch_norm_relu.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"
#include "memory/registry.h"
#include "runtime/gradcheck.h"
#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

namespace F = nn::functional;
using testing::expect_throw_with;
using testing::random64;

constexpr double kTolerance = 1e-6;

Tensor labels(const std::vector<std::int64_t>& values) {
  return Tensor::from_vector<std::int64_t>(values, {static_cast<std::int64_t>(values.size())});
}

double max_abs_difference(const Tensor& a, const Tensor& b) {
  return a.sub(b).to(DType::Float64).pow(2.0).max().sqrt().item<double>();
}

TEST(FunctionalConv2d, GradcheckWithGroupsStrideDilationPaddingAndBias) {
  const Tensor x = random64({2, 4, 6, 5}, 1, true), w = random64({6, 2, 3, 3}, 2, true), b = random64({6}, 3, true);
  const auto options = F::Conv2dFuncOptions().stride({2, 1}).padding(1).dilation({1, 2}).groups(2);
  EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) { return F::conv2d(in[0], in[1], in[2], options); },
                      {x, w, b}),
            kTolerance);
  EXPECT_EQ(F::conv2d(x, w, b, options).sizes(), (Shape{2, 6, 3, 3}));
  // Without bias, and with only the weight requiring grad.
  const Tensor x_const = random64({1, 3, 5, 5}, 4), w2 = random64({2, 3, 3, 3}, 5, true);
  EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) { return F::conv2d(x_const, in[0]); }, {w2}), kTolerance);
}

TEST(FunctionalConv2d, StridedInputGivesTheSameResult) {
  const Tensor nhwc = random64({2, 5, 6, 3}, 6);  // a channels-last buffer viewed as NCHW
  const Tensor x = nhwc.permute({0, 3, 1, 2});
  ASSERT_FALSE(x.is_contiguous());
  const Tensor w = random64({4, 3, 3, 3}, 7);
  EXPECT_LE(max_abs_difference(F::conv2d(x, w), F::conv2d(x.contiguous(), w)), 0.0);
}

TEST(FunctionalConv2d, ErrorsNameTheOpAndTheShapes) {
  const Tensor w = random64({4, 3, 3, 3}, 8);
  expect_throw_with([&] { F::conv2d(random64({3, 32, 32}, 9), w); },
                    {"conv2d: input must be 4-D (N,C,H,W), got [3, 32, 32]"});
  expect_throw_with([&] { F::conv2d(random64({1, 5, 8, 8}, 10), w); }, {"conv2d", "[4, 3, 3, 3]", "[1, 5, 8, 8]"});
  expect_throw_with([&] { F::conv2d(random64({1, 3, 8, 8}, 11), w, random64({5}, 12)); }, {"conv2d", "bias", "[4]"});
  expect_throw_with([&] { F::conv2d(random64({1, 3, 8, 8}, 11).to(DType::Float32), w); }, {"conv2d", "float32", "float64"});
}

TEST(FunctionalBatchNorm, TrainingGradcheckOver4dAnd2dInputs) {
  for (const Shape& shape : {Shape{3, 2, 4, 3}, Shape{6, 3}}) {
    const Tensor x = random64(shape, 20, true), w = random64({shape[1]}, 21, true), b = random64({shape[1]}, 22, true);
    EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) {
                return F::batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], /*training=*/true);
              }, {x, w, b}),
              kTolerance)
        << shape_str(shape);
  }
}

TEST(FunctionalBatchNorm, TrainingUpdatesRunningStatsWithUnbiasedVariance) {
  const Tensor x = random64({4, 3, 2, 5}, 23);
  Tensor running_mean = zeros({3}, DType::Float64), running_var = ones({3}, DType::Float64);
  F::batch_norm(x, running_mean, running_var, Tensor(), Tensor(), true, 0.25);
  const Tensor batch_mean = x.mean({0, 2, 3});
  const Tensor centered = x.sub(batch_mean.view({1, 3, 1, 1}));
  const Tensor unbiased_var = centered.mul(centered).sum({0, 2, 3}).div(4.0 * 2 * 5 - 1);
  EXPECT_LE(max_abs_difference(running_mean, batch_mean.mul(0.25)), 1e-14);
  EXPECT_LE(max_abs_difference(running_var, unbiased_var.mul(0.25).add(0.75)), 1e-14);
}

TEST(FunctionalBatchNorm, EvalUsesRunningStatsAndHasGradients) {
  const Tensor x = random64({3, 2, 3, 3}, 24, true), w = random64({2}, 25, true), b = random64({2}, 26, true);
  const Tensor running_mean = random64({2}, 27), running_var = random64({2}, 28).mul(0.1).add(1.0);
  EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) {
              return F::batch_norm(in[0], running_mean, running_var, in[1], in[2], /*training=*/false);
            }, {x, w, b}),
            kTolerance);
  Tensor expected;
  {
    NoGradGuard no_grad;
    expected = x.sub(running_mean.view({1, 2, 1, 1}))
                   .div(running_var.add(1e-5).sqrt().view({1, 2, 1, 1}))
                   .mul(w.view({1, 2, 1, 1}))
                   .add(b.view({1, 2, 1, 1}));
  }
  EXPECT_LE(max_abs_difference(F::batch_norm(x, running_mean, running_var, w, b, false), expected), 1e-12);
  expect_throw_with([&] { F::batch_norm(x, Tensor(), Tensor(), w, b, false); }, {"batch_norm", "running_mean"});
  const Tensor grad_buffer = zeros({2}, TensorOptions().dtype(DType::Float64).requires_grad(true));
  expect_throw_with([&] { F::batch_norm(x, grad_buffer, running_var, w, b, true); }, {"batch_norm", "must not require grad"});
}

// On the CPU batch_norm_relu runs the fused CPU kernels for float32/float64 (ops/cpu/
// batch_norm_relu_cpu.cpp; otherwise batch norm's kernels with the add and the relu in place);
// checked here are its gradients (the residual's included), that it is batch_norm + add + relu
// bit for bit, and its argument checks. The fused GPU kernels are checked against it in
// tests/runtime/test_batch_norm_relu_cuda.cpp.
TEST(FunctionalBatchNormRelu, GradcheckWithAndWithoutResidual) {
  const Tensor x = random64({3, 2, 4, 3}, 40, true), r = random64({3, 2, 4, 3}, 41, true);
  const Tensor w = random64({2}, 42, true), b = random64({2}, 43, true);
  EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) {
              return F::batch_norm_relu(in[0], in[3], Tensor(), Tensor(), in[1], in[2], /*training=*/true);
            }, {x, w, b, r}),
            kTolerance);
  EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) {
              return F::batch_norm_relu(in[0], Tensor(), Tensor(), Tensor(), in[1], in[2], /*training=*/true);
            }, {x, w, b}),
            kTolerance);
  const Tensor out = F::batch_norm_relu(x, r, Tensor(), Tensor(), w, b, true);
  EXPECT_EQ(out.min().item<double>(), 0.0) << "some values are clipped by the ReLU";
  EXPECT_GT(out.max().item<double>(), 0.0);
}

// Float32 values, the running statistics, and the gradients of x, weight, bias and residual equal
// those of relu(batch_norm(x) + residual) through three nodes, bit for bit; the forward holds
// one buffer, not three; a gradient the caller holds is not written to (the in-place mask is
// only for gradients nobody else sees).
TEST(FunctionalBatchNormRelu, IsBatchNormAddReluBitForBitInOneBuffer) {
  for (const bool with_residual : {true, false}) {
    SCOPED_TRACE(with_residual ? "with residual" : "without residual");
    const auto f32 = [](std::uint64_t seed) { return random64({4, 3, 8, 7}, seed).to(DType::Float32); };
    struct Run {
      Tensor out, running_mean, running_var;
      std::vector<std::vector<float>> grads;
    };
    auto run = [&](bool composed, bool hold_gradient) {
      Tensor x = f32(50).requires_grad_(true), r = f32(51).requires_grad_(true);
      Tensor w = random64({3}, 52).to(DType::Float32).requires_grad_(true);
      Tensor b = random64({3}, 53).to(DType::Float32).requires_grad_(true);
      Run result{Tensor(), zeros({3}), ones({3}), {}};
      const Tensor residual = with_residual ? r : Tensor();
      result.out = composed ? (with_residual ? F::batch_norm(x, result.running_mean, result.running_var, w, b, true) + r
                                             : F::batch_norm(x, result.running_mean, result.running_var, w, b, true))
                                  .relu()
                            : F::batch_norm_relu(x, residual, result.running_mean, result.running_var, w, b, true);
      const Tensor gradient = f32(54);
      const std::vector<float> gradient_before = gradient.to_vector<float>();
      if (hold_gradient) {
        result.out.backward(gradient);
        EXPECT_EQ(gradient.to_vector<float>(), gradient_before) << "the caller's gradient was written to";
      } else {
        result.out.mul(gradient).sum().backward();  // the relu node gets a gradient of its own
      }
      for (const Tensor& t : {x, w, b}) result.grads.push_back(t.grad().to_vector<float>());
      if (with_residual) result.grads.push_back(r.grad().to_vector<float>());
      return result;
    };
    for (const bool hold_gradient : {false, true}) {
      const Run composed = run(true, hold_gradient), fused = run(false, hold_gradient);
      EXPECT_EQ(fused.out.to_vector<float>(), composed.out.to_vector<float>());
      EXPECT_EQ(fused.running_mean.to_vector<float>(), composed.running_mean.to_vector<float>());
      EXPECT_EQ(fused.running_var.to_vector<float>(), composed.running_var.to_vector<float>());
      ASSERT_EQ(fused.grads.size(), composed.grads.size());
      for (std::size_t i = 0; i < fused.grads.size(); ++i) EXPECT_EQ(fused.grads[i], composed.grads[i]) << "input " << i;
    }
  }
  const Tensor x = random64({16, 8, 16, 16}, 55).to(DType::Float32), r = random64({16, 8, 16, 16}, 56).to(DType::Float32);
  const Tensor w = random64({8}, 57).to(DType::Float32).requires_grad_(true);
  const std::size_t before = memory_allocated(Device::cpu());
  reset_peak_memory_stats(Device::cpu());
  const Tensor out = F::batch_norm_relu(x, r, Tensor(), Tensor(), w, Tensor(), true);
  EXPECT_LE(max_memory_allocated(Device::cpu()) - before, static_cast<std::size_t>(out.nbytes()) + 64 * 1024)
      << "one buffer of " << out.nbytes() << " bytes for the output, the statistics beside it";
}

// The CPU's fused kernels (ops/cpu/batch_norm_relu_cpu.cpp) against batch_norm + add + relu
// through three nodes, bit for bit, in float32 and float64, at sizes whose spatial runs are not
// a multiple of the vector width (so the masked gradient's runs start at every alignment), with
// and without a residual, with the residual's or the input's gradient wanted or not (the
// backward's scratch run and grad_residual paths).
TEST(FunctionalBatchNormRelu, CpuFusedKernelsAreBatchNormAddReluBitForBitAtOddSizes) {
  struct Case {
    Shape shape;
    bool residual, residual_grad, input_grad;
  };
  const std::vector<Shape> shapes = {{5, 3, 13, 11}, {9, 5, 14, 14}, {2, 1, 1, 1}, {3, 2, 1, 7}, {2, 4, 28, 28}};
  std::uint64_t seed = 300;
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& shape : shapes) {
      const ops::BatchNormShape s{shape[0], shape[1], shape[2], shape[3]};
      ASSERT_TRUE(ops::batch_norm_relu_fused(ops::Context{Device::cpu(), nullptr, nullptr}, s, dtype));
      for (const Case& c : {Case{shape, false, false, true}, Case{shape, true, true, true},
                            Case{shape, true, false, true}, Case{shape, true, true, false}}) {
        SCOPED_TRACE(shape_str(shape) + " " + dtype_name(dtype) + (c.residual ? " residual" : "") +
                     (c.residual_grad ? " (its gradient)" : "") + (c.input_grad ? " input gradient" : ""));
        seed += 10;
        const std::int64_t channels = shape[1];
        auto run = [&](bool composed) {
          Tensor x = random64(shape, seed).to(dtype).requires_grad_(c.input_grad);
          Tensor r = random64(shape, seed + 1).to(dtype).requires_grad_(c.residual_grad);
          Tensor w = random64({channels}, seed + 2).to(dtype).requires_grad_(true);
          Tensor b = random64({channels}, seed + 3).to(dtype).requires_grad_(true);
          Tensor mean = zeros({channels}, TensorOptions().dtype(dtype)), var = ones({channels}, TensorOptions().dtype(dtype));
          const Tensor residual = c.residual ? r : Tensor();
          Tensor out;
          if (composed) {
            Tensor y = F::batch_norm(x, mean, var, w, b, true);
            out = (c.residual ? y + r : y).relu();
          } else {
            out = F::batch_norm_relu(x, residual, mean, var, w, b, true);
          }
          out.backward(random64(shape, seed + 4).to(dtype));
          std::vector<std::vector<double>> values = {out.to(DType::Float64).to_vector<double>(),
                                                     mean.to(DType::Float64).to_vector<double>(),
                                                     var.to(DType::Float64).to_vector<double>()};
          for (const Tensor& t : {x, w, b, r}) {
            if (t.requires_grad()) values.push_back(t.grad().to(DType::Float64).to_vector<double>());
          }
          return values;
        };
        const auto composed = run(true), fused = run(false);
        ASSERT_EQ(fused.size(), composed.size());
        for (std::size_t i = 0; i < fused.size(); ++i) EXPECT_EQ(fused[i], composed[i]) << "value set " << i;
      }
    }
  }
}

TEST(FunctionalBatchNormRelu, ResidualMustMatchTheInput) {
  const Tensor x = random64({3, 2, 4, 3}, 44), w = random64({2}, 45), b = random64({2}, 46);
  expect_throw_with([&] { F::batch_norm_relu(x, random64({3, 2, 4, 4}, 47), Tensor(), Tensor(), w, b, true); },
                    {"batch_norm_relu", "residual", "[3, 2, 4, 3]", "[3, 2, 4, 4]"});
  expect_throw_with([&] { F::batch_norm_relu(x, x.to(DType::Float32), Tensor(), Tensor(), w, b, true); },
                    {"batch_norm_relu", "float"});
  expect_throw_with([&] { F::batch_norm_relu(x, Tensor(), Tensor(), Tensor(), w, b, false); },
                    {"batch_norm", "running_mean"});
}

TEST(FunctionalPooling, MaxPoolGradcheckAndDefaultStride) {
  const Tensor x = random64({2, 3, 7, 6}, 30, true);
  const auto options = F::MaxPool2dFuncOptions(3).stride({2, 1}).padding(1).dilation({1, 2});
  EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) { return F::max_pool2d(in[0], options); }, {x}), kTolerance);
  EXPECT_EQ(F::max_pool2d(x, F::MaxPool2dFuncOptions(2)).sizes(), (Shape{2, 3, 3, 3}));  // stride = kernel
}

TEST(FunctionalPooling, AvgPoolGradcheckWithAndWithoutPadCounting) {
  const Tensor x = random64({2, 2, 7, 5}, 31, true);
  for (bool count_include_pad : {true, false}) {
    const auto options = F::AvgPool2dFuncOptions({3, 2}).stride(2).padding({1, 1}).count_include_pad(count_include_pad);
    EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) { return F::avg_pool2d(in[0], options); }, {x}), kTolerance);
  }
}

TEST(FunctionalPooling, AdaptiveAvgPoolGradcheckAndGlobalMean) {
  const Tensor x = random64({2, 3, 7, 5}, 32, true);
  EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) { return F::adaptive_avg_pool2d(in[0], {3, 2}); }, {x}),
            kTolerance);
  EXPECT_LE(max_abs_difference(F::adaptive_avg_pool2d(x, 1), x.mean({2, 3}, true)), 1e-14);
  expect_throw_with([&] { F::adaptive_avg_pool2d(random64({3, 5}, 33), 1); }, {"adaptive_avg_pool2d", "4-D", "[3, 5]"});
}

TEST(FunctionalLoss, LogSoftmaxGradcheckOverTheLastDim) {
  const Tensor x = random64({2, 3, 5}, 40, true);
  EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) { return F::log_softmax(in[0], -1); }, {x}), kTolerance);
  EXPECT_LE(max_abs_difference(F::log_softmax(x, 2).exp().sum({2}), ones({2, 3}, DType::Float64)), 1e-14);
  // Another dimension runs through a transpose: the same values as doing it by hand.
  EXPECT_LE(max_abs_difference(F::log_softmax(x, 0), F::log_softmax(x.transpose(0, 2), -1).transpose(0, 2)), 0.0);
  expect_throw_with([&] { F::log_softmax(x, 3); }, {"log_softmax", "3"});
}

TEST(FunctionalLoss, NllLossGradcheckAndComposition) {
  const Tensor logits = random64({5, 4}, 41, true);
  const Tensor targets = labels({3, 0, 1, 3, 2});
  EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) { return F::nll_loss(F::log_softmax(in[0], 1), targets); },
                      {logits}),
            kTolerance);
  const Tensor loss = F::nll_loss(F::log_softmax(logits, 1), targets);
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_NEAR(loss.item<double>(), F::cross_entropy(logits, targets).item<double>(), 1e-14);
  expect_throw_with([&] { F::nll_loss(logits, labels({0, 1, 4, 0, 0})); }, {"nll_loss", "target 4", "sample 2", "[0, 4)"});
  expect_throw_with([&] { F::nll_loss(logits, labels({0, 1})); }, {"nll_loss", "targets must be [5]", "[2]"});
}

TEST(FunctionalLoss, CrossEntropyGradcheckWithLabelSmoothing) {
  const Tensor logits = random64({6, 5}, 42, true);
  const Tensor targets = labels({4, 0, 2, 2, 1, 3});
  for (double smoothing : {0.0, 0.1}) {
    EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) { return F::cross_entropy(in[0], targets, smoothing); },
                        {logits}),
              kTolerance)
        << "label_smoothing " << smoothing;
  }
  // Smoothing mixes in the mean over classes of -log p.
  const Tensor log_p = F::log_softmax(logits, 1);
  const double nll = F::nll_loss(log_p, targets).item<double>();
  const double uniform = log_p.neg().mean().item<double>();
  EXPECT_NEAR(F::cross_entropy(logits, targets, 0.1).item<double>(), 0.9 * nll + 0.1 * uniform, 1e-13);
}

TEST(FunctionalDropout, GradcheckWithAFixedGenerator) {
  const Tensor x = random64({4, 25}, 50, true);
  EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) {
              Generator generator(7);  // the same mask on every evaluation
              return F::dropout(in[0], 0.3, true, generator);
            }, {x}),
            kTolerance);
}

TEST(FunctionalDropout, ReproducibleFromTheGeneratorSeedAndIdentityWhenOff) {
  Generator data(51);
  const Tensor x = uniform({1000}, 0.5, 1.5, data, DType::Float64);  // never 0
  Generator a(9), b(9), c(10);
  const auto ya = F::dropout(x, 0.4, true, a).to_vector<double>();
  EXPECT_EQ(ya, F::dropout(x, 0.4, true, b).to_vector<double>());   // same seed, same mask
  EXPECT_NE(ya, F::dropout(x, 0.4, true, c).to_vector<double>());   // other seed
  EXPECT_NE(ya, F::dropout(x, 0.4, true, a).to_vector<double>());   // next draw, new mask
  const auto xs = x.to_vector<double>();
  int kept = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (ya[i] != 0) {
      ++kept;
      EXPECT_DOUBLE_EQ(ya[i], xs[i] / 0.6);
    }
  }
  EXPECT_NEAR(kept, 600, 6 * std::sqrt(1000 * 0.4 * 0.6));  // Binomial(1000, 0.6), 6 sigma
  EXPECT_TRUE(F::dropout(x, 0.4, /*training=*/false, a).is_same(x));
  EXPECT_TRUE(F::dropout(x, 0.0, true, a).is_same(x));
  expect_throw_with([&] { F::dropout(x, 1.5, true, a); }, {"dropout", "p must be in [0, 1]", "1.5"});
}

// The functions composed as in a small CNN: one gradcheck through every node type at once.
TEST(FunctionalChain, ConvBatchNormPoolLossGradcheck) {
  const Tensor x = random64({3, 2, 6, 6}, 60, true), w = random64({4, 2, 3, 3}, 61, true);
  const Tensor gamma = random64({4}, 62, true), beta = random64({4}, 63, true);
  const Tensor fc = random64({4, 3}, 64, true);
  const Tensor targets = labels({2, 0, 1});
  auto network = [&](const std::vector<Tensor>& in) {
    Tensor h = F::conv2d(in[0], in[1], Tensor(), F::Conv2dFuncOptions().padding(1));
    h = F::batch_norm(h, Tensor(), Tensor(), in[2], in[3], true).relu();
    h = F::max_pool2d(h, F::MaxPool2dFuncOptions(2));
    h = F::avg_pool2d(h, F::AvgPool2dFuncOptions(2).stride(1).padding(1));
    h = F::adaptive_avg_pool2d(h, 1).flatten(1);
    Generator generator(3);
    h = F::dropout(h, 0.25, true, generator);
    return F::cross_entropy(h.matmul(in[4]), targets, 0.05);
  };
  EXPECT_LE(gradcheck(network, {x, w, gamma, beta, fc}), kTolerance);
}

}  // namespace
}  // namespace sublet
