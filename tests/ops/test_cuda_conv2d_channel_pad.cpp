// The channel padding of 16-bit channels-last convolutions (ops/cuda/conv2d_channel_pad.h):
//  - the widen and narrow copies against a host loop: every value of every row, the padding
//    channels zero (the padded buffer starts as all ones bits), row counts that are not
//    multiples of the block (1, 7, 1000, 70001), every channel count 1..P for P = 4 and 8;
//  - conv2d through the kernel tables with TuningOptions::conv_pad_channels 4 and 8 against the
//    float32 CPU kernels (same 16-bit-rounded inputs, tests/ops/low_precision_gpu_support.h's
//    tolerance per dtype) and against the unpadded cuDNN run at twice that: output with bias,
//    input gradient, weight gradient, bias gradient; C = 1, 2, 3, 5, 7 with strides, padding,
//    dilation and non-square kernels, bfloat16 and float16;
//  - the accumulating input gradient (grad_input += ...) against the CPU's gradient plus the
//    values it started with;
//  - that the padded path runs where it applies and only there: the widened input's bytes show in
//    the allocator's requests for bfloat16, and float32's requests do not change.
// NaN and infinity fail.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <utility>

#include "core/tuning.h"
#include "low_precision_gpu_support.h"
#include "ops/conv2d.h"
#include "ops/cuda/conv2d_channel_pad.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

std::vector<std::uint16_t> random_bits(std::size_t count, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(1, 0xFFFF);  // never 0, so a missing copy shows
  std::vector<std::uint16_t> out(count);
  for (auto& v : out) v = static_cast<std::uint16_t>(dist(gen));
  return out;
}

TEST(CudaConv2dChannelPad, WidenAndNarrowCopyEveryRow) {
  SUBLET_SKIP_WITHOUT_GPU("channel widening and narrowing copies against a host loop");
  const Context ctx = gpu_context();
  for (std::int64_t padded : {4, 8}) {
    for (std::int64_t channels = 1; channels <= padded; ++channels) {
      for (std::int64_t rows : {1, 7, 1000, 70001}) {
        const std::string what = std::to_string(rows) + " rows, " + std::to_string(channels) + " -> " +
                                 std::to_string(padded) + " channels";
        const std::vector<std::uint16_t> narrow = random_bits(static_cast<std::size_t>(rows * channels), 11);
        DeviceBuffer<std::uint16_t> src(narrow);
        DeviceBuffer<std::uint16_t> wide(std::vector<std::uint16_t>(static_cast<std::size_t>(rows * padded), 0xFFFF));
        cuda::conv2d_widen_channels(ctx, rows, channels, padded, src.get(), wide.get());
        const std::vector<std::uint16_t> got = wide.download();
        std::size_t bad = 0;
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t c = 0; c < padded; ++c) {
            const std::uint16_t want = c < channels ? narrow[r * channels + c] : 0;
            if (got[r * padded + c] != want && bad++ < 3) {
              ADD_FAILURE() << what << ": widened [" << r << ", " << c << "] = " << got[r * padded + c] << ", want "
                            << want;
            }
          }
        EXPECT_EQ(bad, 0u) << what;
        // Narrowing a buffer whose padding channels hold values keeps only the first `channels`.
        const std::vector<std::uint16_t> full = random_bits(static_cast<std::size_t>(rows * padded), 12);
        DeviceBuffer<std::uint16_t> wide_values(full);
        DeviceBuffer<std::uint16_t> back(std::vector<std::uint16_t>(static_cast<std::size_t>(rows * channels), 0));
        cuda::conv2d_narrow_channels(ctx, rows, padded, channels, wide_values.get(), back.get());
        const std::vector<std::uint16_t> narrowed = back.download();
        bad = 0;
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t c = 0; c < channels; ++c)
            if (narrowed[r * channels + c] != full[r * padded + c] && bad++ < 3) {
              ADD_FAILURE() << what << ": narrowed [" << r << ", " << c << "] = " << narrowed[r * channels + c]
                            << ", want " << full[r * padded + c];
            }
        EXPECT_EQ(bad, 0u) << what;
      }
    }
  }
}

// Asymmetric stride, padding and dilation on top of a base shape.
Conv2dShape with(Conv2dShape s, std::int64_t stride_w, std::int64_t pad_h, std::int64_t dilation_w) {
  s.stride_w = stride_w, s.pad_h = pad_h, s.dilation_w = dilation_w;
  return s;
}

std::vector<Conv2dShape> narrow_shapes() {
  return {
      conv_shape(2, 3, 32, 32, 64, 7, 7, 2, 3),         // ResNet's stem on 32x32 images
      conv_shape(1, 3, 224, 224, 64, 7, 7, 2, 3),       // at 224x224
      conv_shape(3, 1, 13, 11, 8, 5, 5, 1, 2),          // 1 channel, odd sizes
      conv_shape(2, 2, 9, 10, 6, 3, 3, 2, 1),           // 2 channels, stride 2
      conv_shape(2, 5, 8, 9, 7, 3, 3, 1, 0),            // 5 channels, no padding
      conv_shape(2, 7, 10, 10, 16, 3, 3, 1, 2, 2),      // 7 channels, dilation 2
      conv_shape(4, 3, 12, 12, 24, 1, 1, 1, 0),         // 1x1
      with(conv_shape(2, 3, 11, 13, 12, 5, 3, 1, 1), 2, 2, 2),  // stride 1x2, padding 2x1, dilation 1x2
      conv_shape(8, 3, 32, 32, 8, 3, 3, 1, 1),          // weight gradient sums 8 * 32 * 32 = 8192 terms
  };
}

template <typename T>
void check_padded(const Conv2dShape& s, int multiple) {
  const auto input = rounded_values<T>(s.input_numel(), 31);
  const auto weight = rounded_values<T>(s.weight_numel(), 32);
  const auto bias = rounded_values<T>(s.out_channels, 33);
  const auto grad_output = rounded_values<T>(s.output_numel(), 34);
  const ConvData<T> typed{input.typed, weight.typed, bias.typed, grad_output.typed};
  const ConvResults<float> reference = cpu_conv(s, {input.exact, weight.exact, bias.exact, grad_output.exact}, true);
  Conv2dShape last = s;
  last.format = MemoryFormat::ChannelsLast;
  const DType dtype = DTypeOf<T>::value;
  const std::string what = "padded to multiples of " + std::to_string(multiple) + ", " + describe(s, dtype, last.format);
  EXPECT_GT(cuda::conv2d_padded_channels(last, dtype, multiple), s.in_channels) << what;
  ConvResults<T> unpadded;
  {
    const ScopedTuning off([](TuningOptions& o) { o.conv_pad_channels = kConvPadChannelsOff; });
    unpadded = gpu_conv(s, MemoryFormat::ChannelsLast, typed, true);
  }
  const ScopedTuning on([multiple](TuningOptions& o) { o.conv_pad_channels = multiple; });
  const ConvResults<T> padded = gpu_conv(s, MemoryFormat::ChannelsLast, typed, true);
  expect_conv_near(s, padded, reference, what + " vs float32 CPU");
  expect_conv_near(s, padded, as_float(unpadded), what + " vs unpadded cuDNN", 2.0);
}

TEST(CudaConv2dChannelPad, PaddedMatchesUnpaddedAndCpu) {
  SUBLET_SKIP_WITHOUT_GPU("channel-padded 16-bit conv2d against the unpadded one and the CPU");
  for (const Conv2dShape& s : narrow_shapes()) {
    for (int multiple : {4, 8}) {
      run_case("bfloat16 x" + std::to_string(multiple) + " " + describe(s, DType::BFloat16, MemoryFormat::ChannelsLast),
               [&] { check_padded<BFloat16>(s, multiple); });
      run_case("float16 x" + std::to_string(multiple) + " " + describe(s, DType::Float16, MemoryFormat::ChannelsLast),
               [&] { check_padded<Float16>(s, multiple); });
    }
  }
}

// grad_input += the pass, padded: the CPU's gradient plus the starting values.
template <typename T>
void check_accumulate(Conv2dShape s, int multiple) {
  const auto weight = rounded_values<T>(s.weight_numel(), 42);
  const auto grad_output = rounded_values<T>(s.output_numel(), 43);
  const auto start = rounded_values<T>(s.input_numel(), 44);
  const ConvResults<float> cpu =
      cpu_conv(s, {std::vector<float>(s.input_numel(), 0.0f), weight.exact, {}, grad_output.exact}, false);
  std::vector<float> expected(cpu.grad_input.size());
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = cpu.grad_input[i] + start.exact[i];
  s.format = MemoryFormat::ChannelsLast;
  const std::int64_t oh = s.out_height(), ow = s.out_width();
  DeviceBuffer<T> w(to_channels_last(weight.typed, s.out_channels, s.in_channels, s.kernel_h, s.kernel_w));
  DeviceBuffer<T> dy(to_channels_last(grad_output.typed, s.batch, s.out_channels, oh, ow));
  DeviceBuffer<T> dx(to_channels_last(start.typed, s.batch, s.in_channels, s.in_height, s.in_width));
  const DType dtype = DTypeOf<T>::value;
  const ScopedTuning on([multiple](TuningOptions& o) { o.conv_pad_channels = multiple; });
  const std::string what = "accumulating, padded to multiples of " + std::to_string(multiple) + ", " +
                           describe(s, dtype, s.format);
  if (!conv2d_backward_input_accumulate(gpu_context(), s, dtype, dy.get(), w.get(), dx.get())) {
    // cuDNN's graph API had no engine: the caller adds instead; grad_input must be untouched.
    const std::vector<T> got = dx.download();
    const std::vector<T> before = to_channels_last(start.typed, s.batch, s.in_channels, s.in_height, s.in_width);
    EXPECT_EQ(std::memcmp(got.data(), before.data(), got.size() * sizeof(T)), 0) << what << ": declined but wrote";
    return;
  }
  const std::vector<T> got = from_channels_last(dx.download(), s.batch, s.in_channels, s.in_height, s.in_width);
  const double terms = static_cast<double>(s.kernel_h * s.kernel_w * s.out_channels) + 1;
  expect_near_reference(got, expected, tolerance_for<T>(expected, terms), what);
}

TEST(CudaConv2dChannelPad, AccumulatingInputGradientAddsOnce) {
  SUBLET_SKIP_WITHOUT_GPU("channel-padded accumulating input gradient against the CPU");
  for (const Conv2dShape& s : {conv_shape(2, 3, 16, 16, 16, 7, 7, 2, 3), conv_shape(2, 5, 9, 8, 6, 3, 3, 1, 1)}) {
    for (int multiple : {4, 8}) {
      run_case("bfloat16 x" + std::to_string(multiple), [&] { check_accumulate<BFloat16>(s, multiple); });
      run_case("float16 x" + std::to_string(multiple), [&] { check_accumulate<Float16>(s, multiple); });
    }
  }
}

// What one forward asks of the allocator (blocks, requested bytes) with `multiple`, after a first
// call that built the plans.
template <typename T>
std::pair<std::int64_t, std::int64_t> forward_requests(const Conv2dShape& s, int multiple) {
  DeviceBuffer<T> x(s.input_numel()), w(s.weight_numel()), y(s.output_numel());
  const Context ctx = gpu_context();
  const ScopedTuning scope([multiple](TuningOptions& o) { o.conv_pad_channels = multiple; });
  conv2d_forward(ctx, s, DTypeOf<T>::value, x.get(), w.get(), nullptr, y.get());
  const memory::DeviceStats before = ctx.allocator->stats();
  conv2d_forward(ctx, s, DTypeOf<T>::value, x.get(), w.get(), nullptr, y.get());
  const memory::DeviceStats after = ctx.allocator->stats();
  const auto all = memory::StatType::All;
  return {after.allocation[all].allocated - before.allocation[all].allocated,
          after.requested_bytes[all].allocated - before.requested_bytes[all].allocated};
}

TEST(CudaConv2dChannelPad, PaddedOnlyWhereItApplies) {
  SUBLET_SKIP_WITHOUT_GPU("the padded path's workspaces in the allocator's requests");
  Conv2dShape s = conv_shape(16, 3, 40, 40, 64, 7, 7, 2, 3);
  s.format = MemoryFormat::ChannelsLast;
  // bfloat16: the widened input and weight are two more blocks than the unpadded pass asks for
  // (its cuDNN workspace, at most one, may differ), and at least the widened input's bytes.
  const auto off = forward_requests<BFloat16>(s, kConvPadChannelsOff);
  const auto on = forward_requests<BFloat16>(s, 8);
  EXPECT_GE(on.first, off.first + 1) << "padded forward: " << on.first << " blocks, unpadded " << off.first;
  EXPECT_GE(on.second, s.batch * s.in_height * s.in_width * 8 * 2) << "no [N, H, W, 8] workspace requested";
  // float32 (im2col) is not padded: the same requests with the setting on and off.
  EXPECT_EQ(forward_requests<float>(s, 8), forward_requests<float>(s, kConvPadChannelsOff));
}

}  // namespace
