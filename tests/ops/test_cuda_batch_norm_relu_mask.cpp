// The fused batch norm + ReLU backward with the ReLU's mask recomputed from the input
// (TuningOptions::bn_relu_mask Input) against the mask read from the forward's output (Output):
// grad_input, grad_weight and grad_bias agree (bits, or rounding of the sums), for bfloat16, float16 and float32
// channels-last (the packed and the one-channel-per-thread kernels, the one-launch kernels of
// small tensors) and 16-bit NCHW. Channels are built so that the forward's pre-ReLU value v is
// exactly 0, a tiny positive or negative value, a float32 denormal, a value that rounds to 0 in
// the storage type, or the rounding error of (x - mean) * scale; the host recomputes v with the
// same fused multiply-add and checks the forward's stored output against it. The Input run gets
// an output buffer of zeros, so it can only match by not reading it. With a residual both
// settings read the output: checked the same.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/tuning.h"
#include "cuda_test_support.h"
#include "layout_test_support.h"
#include "ops/batch_norm_relu.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

// How a channel's weight and bias are chosen (channel c gets kind c % kKinds).
enum Kind : int {
  kRandom,         // random weight and bias
  kZero,           // weight 0, bias 0: v == 0 everywhere, nothing passes
  kTinyPositive,   // weight 0, bias 2^-20: kept in every type (a float16 subnormal)
  kHalfRoundsAway, // weight 0, bias 2^-26: float16 rounds it to 0
  kDenormal,       // weight 0, bias 2^-140: a float32 denormal, 0 in bfloat16 and float16
  kTinyNegative,   // weight 0, bias -2^-140
  kCancelled,      // bias = -((x0 - mean) * scale) rounded: v is that product's rounding error where x == x0
  kTinyScale,      // weight 1e-38, bias 0: every v tiny, many denormal
  kKinds
};

constexpr float kX0 = 0.75f;  // a value every channel holds many times (inputs are multiples of 0.25)

template <typename H>
std::vector<std::uint32_t> float_bits(const std::vector<H>& values) {
  std::vector<std::uint32_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float f = static_cast<float>(values[i]);
    std::memcpy(&bits[i], &f, sizeof f);
  }
  return bits;
}

template <typename H>
H stored(float v) {
  if constexpr (kIsSixteenBit<H>) {
    return H(v);
  } else {
    return v;
  }
}

struct Gradients {
  std::vector<std::uint32_t> input, weight, bias, residual;  // as float bits
};

template <typename H>
class MaskCase {
 public:
  MaskCase(const BatchNormShape& shape, bool residual) : s_(shape), residual_(residual) {
    const std::size_t n = static_cast<std::size_t>(s_.numel());
    const std::vector<float> steps = random_values<float>(n, 31, -8.49, 8.49);
    x_.resize(n);
    for (std::size_t i = 0; i < n; ++i) x_[i] = 0.25f * std::nearbyint(steps[i]);  // -2 .. 2, exact in every type
    for (std::size_t i = 0; i < n; i += 3) x_[i] = kX0;
    residual_values_ = rounded_to<H>(random_values<float>(n, 32, -1.5, 1.5));
    grad_output_ = rounded_to<H>(random_values<float>(n, 33, -1, 1));
    weight_ = random_values<float>(s_.channels, 34, 0.5, 1.5);
    bias_ = random_values<float>(s_.channels, 35, -0.5, 0.5);
    const auto channels = static_cast<std::size_t>(s_.channels);
    d_x_.emplace(to_storage<H>(x_));
    d_residual_.emplace(to_storage<H>(residual_values_));
    d_out_.emplace(n);
    d_weight_.emplace(weight_);
    d_bias_.emplace(bias_);
    d_mean_.emplace(channels);
    d_invstd_.emplace(channels);
  }

  std::int64_t channel_of(std::size_t i) const {
    if (s_.format == MemoryFormat::ChannelsLast) return static_cast<std::int64_t>(i) % s_.channels;
    return (static_cast<std::int64_t>(i) / s_.spatial()) % s_.channels;
  }

  // Runs the forward twice: once for the statistics (which the weight and bias do not change),
  // then with each channel's weight and bias set by its kind.
  void forward() {
    run_forward();
    const std::vector<float> mean = d_mean_->download(), invstd = d_invstd_->download();
    for (std::int64_t c = 0; c < s_.channels; ++c) {
      float& w = weight_[static_cast<std::size_t>(c)];
      float& b = bias_[static_cast<std::size_t>(c)];
      switch (c % kKinds) {
        case kZero: w = 0.0f, b = 0.0f; break;
        case kTinyPositive: w = 0.0f, b = std::ldexp(1.0f, -20); break;
        case kHalfRoundsAway: w = 0.0f, b = std::ldexp(1.0f, -26); break;
        case kDenormal: w = 0.0f, b = std::ldexp(1.0f, -140); break;
        case kTinyNegative: w = 0.0f, b = -std::ldexp(1.0f, -140); break;
        case kTinyScale: w = 1e-38f, b = 0.0f; break;
        case kCancelled: {
          const float a = kX0 - mean[static_cast<std::size_t>(c)];
          const float scale = host_scale(invstd[static_cast<std::size_t>(c)], w);
          b = -static_cast<float>(static_cast<double>(a) * static_cast<double>(scale));
          break;
        }
        default: break;
      }
    }
    d_weight_->upload(weight_);
    d_bias_->upload(bias_);
    run_forward();
    if (!residual_) check_output_against_host();
  }

  Gradients backward(BnReluMask mask, bool with_grad_input) {
    const ScopedTuning scope([mask](TuningOptions& o) { o.bn_relu_mask = mask; });
    const std::size_t n = static_cast<std::size_t>(s_.numel());
    DeviceBuffer<H> d_grad_output(to_storage<H>(grad_output_)), d_gi(n), d_gr(n);
    DeviceBuffer<float> d_gw(static_cast<std::size_t>(s_.channels)), d_gb(static_cast<std::size_t>(s_.channels));
    const std::vector<H> real_output = d_out_->download();
    // Recomputing, the backward must not read the output: zeros would mask every gradient.
    if (mask == BnReluMask::Input && !residual_) d_out_->upload(std::vector<H>(n, stored<H>(0.0f)));
    batch_norm_relu_backward_training(gpu_context(), s_, DTypeOf<H>::value, d_grad_output.get(), d_out_->get(),
                                      d_x_->get(), d_weight_->get(), d_mean_->get(), d_invstd_->get(),
                                      with_grad_input ? d_gi.get() : nullptr, d_gw.get(), d_gb.get(),
                                      residual_ ? d_gr.get() : nullptr,
                                      BatchNormReluForwardTerms{d_bias_->get(), residual_});
    d_out_->upload(real_output);
    Gradients g;
    if (with_grad_input) g.input = float_bits(d_gi.download());
    g.weight = float_bits(d_gw.download());
    g.bias = float_bits(d_gb.download());
    if (residual_) g.residual = float_bits(d_gr.download());
    return g;
  }

  std::string name() const {
    return storage_name<H>() + (residual_ ? " +residual [" : " [") + std::to_string(s_.batch) + "," +
           std::to_string(s_.channels) + "," + std::to_string(s_.height) + "," + std::to_string(s_.width) + "] " +
           format_name(s_.format);
  }

 private:
  static float host_scale(float invstd, float weight) {
    return static_cast<float>(static_cast<double>(invstd) * static_cast<double>(weight));
  }

  void run_forward() {
    batch_norm_relu_forward_training(gpu_context(), s_, DTypeOf<H>::value, d_x_->get(),
                                     residual_ ? d_residual_->get() : nullptr, d_weight_->get(), d_bias_->get(), nullptr,
                                     nullptr, 0.1, 1e-5, d_out_->get(), d_mean_->get(), d_invstd_->get());
  }

  // v = fma(x - mean, scale, bias) on the host (std::fma rounds once, as the device's), stored
  // as H: the forward's output must be that, and the near-zero cases must have occurred.
  void check_output_against_host() {
    const std::vector<float> mean = d_mean_->download(), invstd = d_invstd_->download();
    const std::vector<H> out = d_out_->download();
    std::int64_t exact_zero = 0, tiny_passed = 0, rounded_away = 0, tiny_blocked = 0, mismatches = 0;
    for (std::size_t i = 0; i < x_.size(); ++i) {
      const auto c = static_cast<std::size_t>(channel_of(i));
      const float v = std::fma(x_[i] - mean[c], host_scale(invstd[c], weight_[c]), bias_[c]);
      const float kept = static_cast<float>(stored<H>(v > 0.0f ? v : 0.0f));
      if (float_bits(std::vector<H>{out[i]})[0] != float_bits(std::vector<H>{stored<H>(kept)})[0]) ++mismatches;
      // kept is v rounded to H (0 where v <= 0): a positive v rounded away is kept == 0.
      if (v == 0.0f) ++exact_zero;
      if (v > 0.0f && v < 1e-5f) (kept > 0.0f ? tiny_passed : rounded_away) += 1;
      if (v < 0.0f && v > -1e-5f) ++tiny_blocked;
    }
    EXPECT_EQ(mismatches, 0) << name() << ": the forward's output is not fma(x - mean, scale, bias) stored";
    EXPECT_GT(exact_zero, 0) << name();
    EXPECT_GT(tiny_blocked, 0) << name();
    EXPECT_GT(tiny_passed, 0) << name();
    if (kIsSixteenBit<H>) EXPECT_GT(rounded_away, 0) << name() << ": no positive value rounded to 0";
  }

  BatchNormShape s_;
  bool residual_;
  std::vector<float> x_, residual_values_, grad_output_, weight_, bias_;
  // Made once the host values above are (members are initialised before the constructor's body).
  std::optional<DeviceBuffer<H>> d_x_, d_residual_, d_out_;
  std::optional<DeviceBuffer<float>> d_weight_, d_bias_, d_mean_, d_invstd_;
};

float from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The same bits, or differences no larger than `tolerance` of the largest magnitude: summation
// order may round differently, while one element's mask read wrongly moves a channel's sums by
// about 1e-2 of them and that element's input gradient by about its whole size. NaN fails.
void expect_agree(const std::vector<std::uint32_t>& input_mask, const std::vector<std::uint32_t>& output_mask,
                  double tolerance, const std::string& what) {
  ASSERT_EQ(input_mask.size(), output_mask.size()) << what;
  std::size_t differ = 0, first = 0;
  double scale = 0, worst = 0;
  for (std::size_t i = 0; i < input_mask.size(); ++i) {
    const double a = from_bits(input_mask[i]), b = from_bits(output_mask[i]);
    scale = std::fmax(scale, std::fabs(b));
    worst = std::isnan(a) || std::isnan(b) ? NAN : std::fmax(worst, std::fabs(a - b));
    if (input_mask[i] != output_mask[i] && differ++ == 0) first = i;
  }
  const double relative = worst / std::fmax(scale, 1e-30);
  EXPECT_LE(relative, tolerance) << what << ": " << differ << " of " << input_mask.size()
                                 << " differ, the first at " << first;
  if (differ != 0) std::cout << what << ": " << differ << " values differ, largest by " << relative << " of the largest\n";
}

template <typename H>
void check_both_ways(BatchNormShape s, MemoryFormat format, bool residual) {
  s.format = format;
  MaskCase<H> k(s, residual);
  k.forward();
  for (const bool with_grad_input : {true, false}) {
    const Gradients old_way = k.backward(BnReluMask::Output, with_grad_input);
    const Gradients new_way = k.backward(BnReluMask::Input, with_grad_input);
    const std::string what = k.name() + (with_grad_input ? "" : " (no grad_input)");
    const double stored = kIsSixteenBit<H> ? 1e-2 : 1e-5;  // grad_input rounds to the storage type
    expect_agree(new_way.input, old_way.input, stored, what + " grad_input");
    expect_agree(new_way.weight, old_way.weight, 1e-5, what + " grad_weight");
    expect_agree(new_way.bias, old_way.bias, 1e-5, what + " grad_bias");
    expect_agree(new_way.residual, old_way.residual, stored, what + " grad_residual");
  }
}

// Channels-last: one launch each way ({4,64,9,9}: 324 rows), the packed reduction and the
// channels-last passes ({8,64,24,24}: 4608 rows), the one-channel-per-thread kernels (37
// channels: no 16-byte packs), both small and large.
const BatchNormShape kChannelsLastShapes[] = {{4, 64, 9, 9}, {8, 64, 24, 24}, {8, 37, 17, 19}, {2, 37, 5, 5}};
// 16-bit NCHW: planes of 99 values (one per load) and of 128 (8 per load).
const BatchNormShape kPlaneShapes[] = {{4, 20, 9, 11}, {4, 20, 8, 16}};

template <typename H>
void check_all(bool residual) {
  for (const BatchNormShape& s : kChannelsLastShapes) check_both_ways<H>(s, MemoryFormat::ChannelsLast, residual);
  if constexpr (kIsSixteenBit<H>) {
    for (const BatchNormShape& s : kPlaneShapes) check_both_ways<H>(s, MemoryFormat::Contiguous, residual);
  }
}

}  // namespace

TEST(CudaBatchNormReluMask, InputMaskGivesTheOutputMasksBitsInBFloat16) {
  SUBLET_SKIP_WITHOUT_GPU("batch norm + ReLU backward, mask from the input against from the output");
  check_all<BFloat16>(false);
}

TEST(CudaBatchNormReluMask, InputMaskGivesTheOutputMasksBitsInFloat16) {
  SUBLET_SKIP_WITHOUT_GPU("batch norm + ReLU backward, mask from the input against from the output");
  check_all<Float16>(false);
}

TEST(CudaBatchNormReluMask, InputMaskGivesTheOutputMasksBitsInFloat32ChannelsLast) {
  SUBLET_SKIP_WITHOUT_GPU("batch norm + ReLU backward, mask from the input against from the output");
  check_all<float>(false);
}

TEST(CudaBatchNormReluMask, WithAResidualBothSettingsReadTheOutput) {
  SUBLET_SKIP_WITHOUT_GPU("batch norm + residual + ReLU backward under both settings");
  check_all<BFloat16>(true);
  check_all<Float16>(true);
  check_all<float>(true);
}
