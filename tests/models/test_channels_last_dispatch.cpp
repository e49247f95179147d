// The channels-last dispatch path of the nn functionals, run on the CPU: this test registers CPU
// kernels under MemoryFormat::ChannelsLast (adapters that take the NHWC-dense buffers the CUDA
// kernels take, transpose them to NCHW, call the contiguous CPU kernel and transpose the results
// back), so the runtime then picks ChannelsLast (shape.format, NHWC-dense buffers, outputs and
// gradients allocated channels-last) as it will on CUDA with the NHWC kernels. Checked: the kernels
// are called, activations stay channels-last through a ResNet, and the results match the NCHW path
// forward and backward. Its own binary: the registrations change global tables.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "channels_last_support.h"
#include "ops/batch_norm.h"
#include "ops/batch_norm_kernels.h"
#include "ops/conv2d.h"
#include "ops/conv2d_kernels.h"
#include "ops/pooling.h"
#include "ops/pooling_kernels.h"

namespace sublet {
namespace {

using testing::max_abs_diff;
constexpr MemoryFormat kCL = MemoryFormat::ChannelsLast;
using ops::Context;

std::atomic<int> channels_last_calls{0};

// [n][h][w][c] -> [n][c][h][w] and back, for d0 x d1 x d2 x d3 = N x C x H x W.
template <typename T>
std::vector<T> to_nchw(const void* nhwc, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  const T* src = static_cast<const T*>(nhwc);
  std::vector<T> dst(static_cast<std::size_t>(n * c * h * w));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t x = 0; x < w; ++x)
        for (std::int64_t k = 0; k < c; ++k) dst[((i * c + k) * h + y) * w + x] = src[((i * h + y) * w + x) * c + k];
  return dst;
}
template <typename T>
void to_nhwc(const std::vector<T>& nchw, void* nhwc, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  T* dst = static_cast<T*>(nhwc);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t x = 0; x < w; ++x)
        for (std::int64_t k = 0; k < c; ++k) dst[((i * h + y) * w + x) * c + k] = nchw[((i * c + k) * h + y) * w + x];
}

template <typename S>
S contiguous_shape(const S& s) {
  S c = s;
  c.format = MemoryFormat::Contiguous;
  return c;
}

template <typename T>
void conv_forward(const Context& ctx, const ops::Conv2dShape& s, DType dtype, const void* input, const void* weight,
                  const void* bias, void* output) {
  ++channels_last_calls;
  const auto x = to_nchw<T>(input, s.batch, s.in_channels, s.in_height, s.in_width);
  const auto w = to_nchw<T>(weight, s.out_channels, s.in_channels / s.groups, s.kernel_h, s.kernel_w);
  std::vector<T> y(static_cast<std::size_t>(s.output_numel()));
  ops::conv2d_forward_kernels().get("conv2d", ctx.device, dtype)(ctx, contiguous_shape(s), dtype, x.data(), w.data(),
                                                                 bias, y.data());
  to_nhwc(y, output, s.batch, s.out_channels, s.out_height(), s.out_width());
}

template <typename T>
void conv_backward_input(const Context& ctx, const ops::Conv2dShape& s, DType dtype, const void* grad_output,
                         const void* weight, void* grad_input) {
  ++channels_last_calls;
  const auto g = to_nchw<T>(grad_output, s.batch, s.out_channels, s.out_height(), s.out_width());
  const auto w = to_nchw<T>(weight, s.out_channels, s.in_channels / s.groups, s.kernel_h, s.kernel_w);
  std::vector<T> gi(static_cast<std::size_t>(s.input_numel()));
  ops::conv2d_backward_input_kernels().get("conv2d", ctx.device, dtype)(ctx, contiguous_shape(s), dtype, g.data(),
                                                                        w.data(), gi.data());
  to_nhwc(gi, grad_input, s.batch, s.in_channels, s.in_height, s.in_width);
}

template <typename T>
void conv_backward_weight(const Context& ctx, const ops::Conv2dShape& s, DType dtype, const void* grad_output,
                          const void* input, void* grad_weight, void* grad_bias) {
  ++channels_last_calls;
  const auto g = to_nchw<T>(grad_output, s.batch, s.out_channels, s.out_height(), s.out_width());
  const auto x = to_nchw<T>(input, s.batch, s.in_channels, s.in_height, s.in_width);
  std::vector<T> gw(static_cast<std::size_t>(s.weight_numel()));
  ops::conv2d_backward_weight_kernels().get("conv2d", ctx.device, dtype)(ctx, contiguous_shape(s), dtype, g.data(),
                                                                         x.data(), gw.data(), grad_bias);
  to_nhwc(gw, grad_weight, s.out_channels, s.in_channels / s.groups, s.kernel_h, s.kernel_w);
}

template <typename T>
void bn_forward_training(const Context& ctx, const ops::BatchNormShape& s, DType dtype, const void* input,
                         const void* weight, const void* bias, void* running_mean, void* running_var, double momentum,
                         double eps, void* output, void* save_mean, void* save_invstd) {
  ++channels_last_calls;
  const auto x = to_nchw<T>(input, s.batch, s.channels, s.height, s.width);
  std::vector<T> y(x.size());
  ops::batch_norm_forward_training_kernels().get("batch_norm", ctx.device, dtype)(
      ctx, contiguous_shape(s), dtype, x.data(), weight, bias, running_mean, running_var, momentum, eps, y.data(),
      save_mean, save_invstd);
  to_nhwc(y, output, s.batch, s.channels, s.height, s.width);
}

template <typename T>
void bn_backward_training(const Context& ctx, const ops::BatchNormShape& s, DType dtype, const void* grad_output,
                          const void* input, const void* weight, const void* save_mean, const void* save_invstd,
                          void* grad_input, void* grad_weight, void* grad_bias) {
  ++channels_last_calls;
  const auto g = to_nchw<T>(grad_output, s.batch, s.channels, s.height, s.width);
  const auto x = to_nchw<T>(input, s.batch, s.channels, s.height, s.width);
  std::vector<T> gi(x.size());
  ops::batch_norm_backward_training_kernels().get("batch_norm", ctx.device, dtype)(
      ctx, contiguous_shape(s), dtype, g.data(), x.data(), weight, save_mean, save_invstd,
      grad_input ? gi.data() : nullptr, grad_weight, grad_bias);
  if (grad_input) to_nhwc(gi, grad_input, s.batch, s.channels, s.height, s.width);
}

template <typename T>
void adaptive_forward(const Context& ctx, const ops::AdaptivePool2dShape& s, DType dtype, const void* input,
                      void* output) {
  ++channels_last_calls;
  const auto x = to_nchw<T>(input, s.batch, s.channels, s.in_height, s.in_width);
  std::vector<T> y(static_cast<std::size_t>(s.output_numel()));
  ops::adaptive_avg_pool2d_forward_kernels().get("adaptive_avg_pool2d", ctx.device, dtype)(ctx, contiguous_shape(s),
                                                                                           dtype, x.data(), y.data());
  to_nhwc(y, output, s.batch, s.channels, s.out_height, s.out_width);
}

template <typename T>
void adaptive_backward(const Context& ctx, const ops::AdaptivePool2dShape& s, DType dtype, const void* grad_output,
                       void* grad_input) {
  ++channels_last_calls;
  const auto g = to_nchw<T>(grad_output, s.batch, s.channels, s.out_height, s.out_width);
  std::vector<T> gi(static_cast<std::size_t>(s.input_numel()));
  ops::adaptive_avg_pool2d_backward_kernels().get("adaptive_avg_pool2d", ctx.device, dtype)(
      ctx, contiguous_shape(s), dtype, g.data(), gi.data());
  to_nhwc(gi, grad_input, s.batch, s.channels, s.in_height, s.in_width);
}

template <typename T>
void max_pool_forward(const Context& ctx, const ops::Pool2dShape& s, DType dtype, const void* input, void* output,
                      std::int64_t* indices) {
  ++channels_last_calls;
  const auto x = to_nchw<T>(input, s.batch, s.channels, s.in_height, s.in_width);
  const std::int64_t out_numel = s.batch * s.channels * s.out_height() * s.out_width();
  std::vector<T> y(static_cast<std::size_t>(out_numel));
  std::vector<std::int64_t> idx(static_cast<std::size_t>(out_numel));
  ops::max_pool2d_forward_kernels().get("max_pool2d", ctx.device, dtype)(ctx, contiguous_shape(s), dtype, x.data(),
                                                                         y.data(), idx.data());
  to_nhwc(y, output, s.batch, s.channels, s.out_height(), s.out_width());
  to_nhwc(idx, indices, s.batch, s.channels, s.out_height(), s.out_width());  // kept for our backward
}

template <typename T>
void max_pool_backward(const Context& ctx, const ops::Pool2dShape& s, DType dtype, const void* grad_output,
                       const std::int64_t* indices, void* grad_input) {
  ++channels_last_calls;
  const auto g = to_nchw<T>(grad_output, s.batch, s.channels, s.out_height(), s.out_width());
  const auto idx = to_nchw<std::int64_t>(indices, s.batch, s.channels, s.out_height(), s.out_width());
  std::vector<T> gi(static_cast<std::size_t>(s.batch * s.channels * s.in_height * s.in_width));
  ops::max_pool2d_backward_kernels().get("max_pool2d", ctx.device, dtype)(ctx, contiguous_shape(s), dtype, g.data(),
                                                                          idx.data(), gi.data());
  to_nhwc(gi, grad_input, s.batch, s.channels, s.in_height, s.in_width);
}

template <typename T>
void register_for(DType dtype) {
  const auto cpu = DeviceType::CPU;
  ops::conv2d_forward_kernels().set(cpu, dtype, kCL, &conv_forward<T>);
  ops::conv2d_backward_input_kernels().set(cpu, dtype, kCL, &conv_backward_input<T>);
  ops::conv2d_backward_weight_kernels().set(cpu, dtype, kCL, &conv_backward_weight<T>);
  ops::batch_norm_forward_training_kernels().set(cpu, dtype, kCL, &bn_forward_training<T>);
  ops::batch_norm_backward_training_kernels().set(cpu, dtype, kCL, &bn_backward_training<T>);
  ops::adaptive_avg_pool2d_forward_kernels().set(cpu, dtype, kCL, &adaptive_forward<T>);
  ops::adaptive_avg_pool2d_backward_kernels().set(cpu, dtype, kCL, &adaptive_backward<T>);
  ops::max_pool2d_forward_kernels().set(cpu, dtype, kCL, &max_pool_forward<T>);
  ops::max_pool2d_backward_kernels().set(cpu, dtype, kCL, &max_pool_backward<T>);
}

class ChannelsLastDispatch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ops::ensure_kernels_registered();  // the contiguous CPU kernels first: ours are added beside them
    register_for<float>(DType::Float32);
    register_for<double>(DType::Float64);
  }
};

Tensor random(const Shape& sizes, std::uint64_t seed) {
  Generator g(seed);
  return randn(sizes, g, TensorOptions().dtype(DType::Float64).requires_grad(true));
}

TEST_F(ChannelsLastDispatch, ConvAndBatchNormRunChannelsLastAndMatchNchw) {
  const Tensor x = random({2, 4, 6, 5}, 1), w = random({3, 4, 3, 3}, 2), b = random({3}, 3);
  const Tensor gamma = random({3}, 4), beta = random({3}, 5);
  const Tensor xc = x.detach().to(kCL).requires_grad_(), wc = w.detach().to(kCL).requires_grad_();
  const Tensor bc = b.detach().clone().requires_grad_(), gc = gamma.detach().clone().requires_grad_(),
               betac = beta.detach().clone().requires_grad_();
  const Tensor mean = zeros({3}, DType::Float64), var = ones({3}, DType::Float64);
  const Tensor mean_c = mean.clone(), var_c = var.clone();
  namespace F = nn::functional;
  const auto opts = F::Conv2dFuncOptions().padding(1);
  const int before = channels_last_calls;
  const Tensor y = F::adaptive_avg_pool2d(F::batch_norm(F::conv2d(x, w, b, opts), mean, var, gamma, beta, true), {2, 2});
  const Tensor conv_c = F::conv2d(xc, wc, bc, opts);
  EXPECT_EQ(conv_c.suggest_memory_format(), kCL);
  const Tensor norm_c = F::batch_norm(conv_c, mean_c, var_c, gc, betac, true);
  EXPECT_EQ(norm_c.suggest_memory_format(), kCL);
  const Tensor yc = F::adaptive_avg_pool2d(norm_c, {2, 2});
  EXPECT_EQ(yc.suggest_memory_format(), kCL);
  EXPECT_EQ(channels_last_calls - before, 3);
  EXPECT_LE(max_abs_diff(y, yc), 1e-10);
  EXPECT_LE(max_abs_diff(mean, mean_c), 1e-12);
  const Tensor up = random({2, 3, 2, 2}, 6).detach();
  (y * up).sum().backward();
  (yc * up).sum().backward();
  EXPECT_EQ(channels_last_calls - before, 3 + 4);  // pool, batch norm, conv input and weight
  for (const auto& [a, c] : {std::pair{x, xc}, std::pair{w, wc}, std::pair{b, bc}, std::pair{gamma, gc},
                             std::pair{beta, betac}}) {
    EXPECT_LE(max_abs_diff(a.grad(), c.grad()), 1e-10);
  }
  EXPECT_TRUE(xc.grad().is_contiguous(kCL));
  EXPECT_TRUE(wc.grad().is_contiguous(kCL));
}

TEST_F(ChannelsLastDispatch, MaxPoolRunsChannelsLastAndMatchesNchw) {
  namespace F = nn::functional;
  const Tensor x = random({2, 3, 7, 6}, 7);
  const Tensor xc = x.detach().to(kCL).requires_grad_();
  const auto opts = F::MaxPool2dFuncOptions(3).stride(2).padding(1);
  const int before = channels_last_calls;
  const Tensor y = F::max_pool2d(x, opts), yc = F::max_pool2d(xc, opts);
  EXPECT_EQ(yc.suggest_memory_format(), kCL);
  EXPECT_LE(max_abs_diff(y, yc), 0.0);
  const Tensor up = random(y.sizes(), 8).detach();
  (y * up).sum().backward();
  (yc * up).sum().backward();
  EXPECT_EQ(channels_last_calls - before, 2);
  EXPECT_LE(max_abs_diff(x.grad(), xc.grad()), 1e-12);
  EXPECT_TRUE(xc.grad().is_contiguous(kCL));
}

TEST_F(ChannelsLastDispatch, ResNetActivationsStayChannelsLastAndTrainAsNchw) {
  const int before = channels_last_calls;
  int four_d = 0;
  const testing::StepLosses losses = testing::channels_last_steps("resnet20", Device::cpu(), 2, [&](nn::Module& model) {
    for (const auto& [name, p] : model.named_parameters()) {
      if (p.dim() == 4) EXPECT_TRUE(p.grad().is_contiguous(kCL)) << name;
    }
  });
  EXPECT_GT(channels_last_calls - before, 2 * 40);  // every conv, batch norm and the pooling, both ways
  for (std::size_t i = 0; i < losses.nchw.size(); ++i) {
    EXPECT_LE(std::abs(losses.nchw[i] - losses.channels_last[i]), 1e-4 * std::abs(losses.nchw[i])) << "step " << i;
  }
  auto model = models::create_model("resnet20", {.in_channels = 3, .num_classes = 10, .seed = 2});
  model->to(kCL);
  for (auto& [name, module] : model->named_modules()) {
    if (name.empty()) continue;
    module->register_forward_hook([&four_d, name = name](nn::Module&, const Tensor&, const Tensor& out) {
      if (out.dim() != 4 || (out.size(2) == 1 && out.size(3) == 1)) return;
      ++four_d;
      EXPECT_EQ(out.suggest_memory_format(), kCL) << name << " " << shape_str(out.strides());
    });
  }
  Generator g(1);
  (*model)(rand({4, 3, 16, 16}, g).to(kCL)).sum().backward();
  EXPECT_GT(four_d, 10);
}

}  // namespace
}  // namespace sublet
