// The convolution + batch norm fusion's CPU composition (ops/conv_bn_fusion.h) against a naive
// float64 reference on random data: the prologue relu(x * scale + bias), the convolution, the
// per-channel sums and the batch norm statistics from them; and the op's argument checks.
#include "ops/conv_bn_fusion.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/errors.h"
#include "nn_test_support.h"

namespace sublet::ops {
namespace {

using testing::cpu_context;
using testing::random_values;

Conv2dShape small_shape() {
  Conv2dShape s;
  s.batch = 2;
  s.in_channels = 3;
  s.in_height = 5;
  s.in_width = 6;
  s.out_channels = 4;
  s.kernel_h = s.kernel_w = 3;
  s.pad_h = s.pad_w = 1;
  return s;
}

// conv(relu(x * scale + bias), w) in float64, NCHW.
std::vector<double> reference_output(const Conv2dShape& s, const std::vector<double>& x, const std::vector<float>& scale,
                                     const std::vector<float>& bias, const std::vector<double>& w) {
  std::vector<double> a(x.size());
  const std::int64_t plane = s.in_height * s.in_width;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto c = static_cast<std::size_t>((static_cast<std::int64_t>(i) / plane) % s.in_channels);
    a[i] = std::max(x[i] * scale[c] + bias[c], 0.0);
  }
  const std::int64_t oh = s.out_height(), ow = s.out_width();
  std::vector<double> y(static_cast<std::size_t>(s.output_numel()), 0.0);
  for (std::int64_t n = 0; n < s.batch; ++n)
    for (std::int64_t k = 0; k < s.out_channels; ++k)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
          double acc = 0;
          for (std::int64_t c = 0; c < s.in_channels; ++c)
            for (std::int64_t r = 0; r < s.kernel_h; ++r)
              for (std::int64_t q = 0; q < s.kernel_w; ++q) {
                const std::int64_t h = i * s.stride_h - s.pad_h + r, v = j * s.stride_w - s.pad_w + q;
                if (h < 0 || h >= s.in_height || v < 0 || v >= s.in_width) continue;
                acc += a[static_cast<std::size_t>(((n * s.in_channels + c) * s.in_height + h) * s.in_width + v)] *
                       w[static_cast<std::size_t>(((k * s.in_channels + c) * s.kernel_h + r) * s.kernel_w + q)];
              }
          y[static_cast<std::size_t>(((n * s.out_channels + k) * oh + i) * ow + j)] = acc;
        }
  return y;
}

TEST(ConvBnFusionCpu, PrologueConvolutionAndSumsMatchAFloat64Reference) {
  const Conv2dShape s = small_shape();
  const auto x = random_values<double>(s.input_numel(), 1);
  const auto w = random_values<double>(s.weight_numel(), 2);
  const auto scale = random_values<float>(s.in_channels, 3, 0.5, 1.5);
  const auto bias = random_values<float>(s.in_channels, 4, -0.5, 0.5);
  std::vector<double> y(static_cast<std::size_t>(s.output_numel()));
  std::vector<float> sum(4), sqsum(4);
  reset_conv_bn_fusion_counts();
  conv2d_scale_bias_relu_genstats(cpu_context(), s, DType::Float64, x.data(), scale.data(), bias.data(), w.data(),
                                  y.data(), sum.data(), sqsum.data());
  const std::vector<double> expected = reference_output(s, x, scale, bias, w);
  for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], expected[i], 1e-9) << "output " << i;
  const std::int64_t plane = s.out_height() * s.out_width();
  for (std::int64_t k = 0; k < s.out_channels; ++k) {
    double want_sum = 0, want_sqsum = 0;
    for (std::int64_t n = 0; n < s.batch; ++n)
      for (std::int64_t p = 0; p < plane; ++p) {
        const double v = expected[static_cast<std::size_t>((n * s.out_channels + k) * plane + p)];
        want_sum += v;
        want_sqsum += v * v;
      }
    // float32 results of float64 sums: one rounding.
    EXPECT_NEAR(sum[static_cast<std::size_t>(k)], want_sum, 1e-6 * std::max(1.0, std::abs(want_sum))) << k;
    EXPECT_NEAR(sqsum[static_cast<std::size_t>(k)], want_sqsum, 1e-6 * want_sqsum) << k;
  }
  const ConvBnFusionCounts counts = conv_bn_fusion_counts();
  EXPECT_EQ(counts.fused, 0u);
  EXPECT_EQ(counts.unfused_backend, 1u);  // the CPU has no fused kernel
}

TEST(ConvBnFusionCpu, WithoutPrologueItIsThePlainConvolution) {
  Conv2dShape s = small_shape();
  s.stride_h = s.stride_w = 2;
  const auto x = random_values<float>(s.input_numel(), 5);
  const auto w = random_values<float>(s.weight_numel(), 6);
  std::vector<float> fused(static_cast<std::size_t>(s.output_numel())), plain(fused.size());
  conv2d_scale_bias_relu_genstats(cpu_context(), s, DType::Float32, x.data(), nullptr, nullptr, w.data(),
                                  fused.data(), nullptr, nullptr);
  conv2d_forward(cpu_context(), s, DType::Float32, x.data(), w.data(), nullptr, plain.data());
  EXPECT_EQ(fused, plain);
}

TEST(ConvBnFusionCpu, StatisticsFromSumsFollowBatchNorm) {
  constexpr std::int64_t kChannels = 3, kCount = 10;
  constexpr double kMomentum = 0.1, kEps = 1e-5;
  const auto values = random_values<double>(kChannels * kCount, 7, -2.0, 3.0);
  std::vector<float> sum(kChannels), sqsum(kChannels);
  for (std::int64_t c = 0; c < kChannels; ++c) {
    double s = 0, q = 0;
    for (std::int64_t i = 0; i < kCount; ++i) {
      const double v = values[static_cast<std::size_t>(c * kCount + i)];
      s += v;
      q += v * v;
    }
    sum[static_cast<std::size_t>(c)] = static_cast<float>(s);
    sqsum[static_cast<std::size_t>(c)] = static_cast<float>(q);
  }
  const auto weight = random_values<float>(kChannels, 8, 0.5, 1.5);
  const auto bias = random_values<float>(kChannels, 9);
  std::vector<float> running_mean(kChannels, 0.0f), running_var(kChannels, 1.0f);
  std::vector<float> mean(kChannels), invstd(kChannels), scale(kChannels), shift(kChannels);
  std::int64_t batches = 4;
  batch_norm_stats_from_sums(cpu_context(), kChannels, kCount, sum.data(), sqsum.data(), weight.data(), bias.data(),
                             running_mean.data(), running_var.data(), kMomentum, kEps, mean.data(), invstd.data(),
                             scale.data(), shift.data(), &batches);
  EXPECT_EQ(batches, 5);
  for (std::int64_t c = 0; c < kChannels; ++c) {
    const auto k = static_cast<std::size_t>(c);
    double m = 0, var = 0;
    for (std::int64_t i = 0; i < kCount; ++i) m += values[static_cast<std::size_t>(c * kCount + i)];
    m /= kCount;
    for (std::int64_t i = 0; i < kCount; ++i) {
      const double d = values[static_cast<std::size_t>(c * kCount + i)] - m;
      var += d * d;
    }
    var /= kCount;  // biased, for normalising
    const double want_invstd = 1.0 / std::sqrt(var + kEps);
    // The sums are float32: relative errors of a few 1e-7 carry into the statistics.
    EXPECT_NEAR(mean[k], m, 1e-5) << c;
    EXPECT_NEAR(invstd[k], want_invstd, 1e-5 * want_invstd) << c;
    EXPECT_NEAR(scale[k], weight[k] * want_invstd, 1e-5 * std::abs(weight[k] * want_invstd)) << c;
    EXPECT_NEAR(shift[k], bias[k] - m * weight[k] * want_invstd, 1e-5) << c;
    EXPECT_NEAR(running_mean[k], kMomentum * m, 1e-6) << c;
    EXPECT_NEAR(running_var[k], (1 - kMomentum) + kMomentum * var * kCount / (kCount - 1), 1e-5) << c;
  }
}

TEST(ConvBnFusionCpu, BadArgumentsAreRefusedWithTheirNames) {
  const Conv2dShape s = small_shape();
  std::vector<float> x(static_cast<std::size_t>(s.input_numel())), w(static_cast<std::size_t>(s.weight_numel()));
  std::vector<float> y(static_cast<std::size_t>(s.output_numel())), v(8);
  try {
    conv2d_scale_bias_relu_genstats(cpu_context(), s, DType::Float32, x.data(), v.data(), nullptr, w.data(), y.data(),
                                    nullptr, nullptr);
    FAIL() << "a scale without a bias ran";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("scale and bias must be given both or neither"), std::string::npos);
  }
  EXPECT_THROW(conv2d_scale_bias_relu_genstats(cpu_context(), s, DType::BFloat16, x.data(), nullptr, nullptr,
                                               w.data(), y.data(), nullptr, nullptr),
               DTypeError);
  EXPECT_THROW(conv2d_scale_bias_relu_genstats(cpu_context(), s, DType::Int64, x.data(), nullptr, nullptr, w.data(),
                                               y.data(), nullptr, nullptr),
               DTypeError);
  Conv2dShape bad = s;
  bad.kernel_h = 9;  // larger than the padded input
  EXPECT_THROW(conv2d_scale_bias_relu_genstats(cpu_context(), bad, DType::Float32, x.data(), nullptr, nullptr,
                                               w.data(), y.data(), nullptr, nullptr),
               ShapeError);
  std::vector<float> stats(8);
  EXPECT_THROW(batch_norm_stats_from_sums(cpu_context(), 2, 1, stats.data(), stats.data(), nullptr, nullptr, nullptr,
                                          nullptr, 0.1, 1e-5, stats.data(), stats.data(), stats.data(), stats.data(),
                                          nullptr),
               ShapeError);  // one value per channel: no variance
  EXPECT_THROW(batch_norm_stats_from_sums(cpu_context(), 2, 4, stats.data(), stats.data(), nullptr, nullptr,
                                          stats.data(), nullptr, 0.1, 1e-5, stats.data(), stats.data(), stats.data(),
                                          stats.data(), nullptr),
               ValueError);  // running_mean without running_var
}

TEST(ConvBnFusionCpu, TheCpuHasNoFusedKernel) {
  EXPECT_FALSE(conv2d_scale_bias_relu_genstats_fused(cpu_context(), small_shape(), DType::Float32, true, true));
}

}  // namespace
}  // namespace sublet::ops
