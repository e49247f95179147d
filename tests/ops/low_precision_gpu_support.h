#pragma once
// Shared by the GPU tests of the 16-bit and channels-last matmul/conv2d kernels
// (test_cuda_half_matmul, test_cuda_half_conv2d, test_cuda_conv2d_channels_last): judging a
// result against its float32 reference with a tolerance per dtype, host-side NCHW <-> NHWC
// permutes, and one conv2d call sequence (forward, backward-input, backward-weight) on either
// device and either layout.
//
// Tolerances: |got - reference| <= rtol * |reference| + atol, for every element, where the
// reference is the float32 CPU kernel on the same (16-bit-rounded) inputs. Products of two
// 16-bit values are exact in float32, and the GPU kernels accumulate in float32, so the
// 16-bit results differ from the reference by their rounding to 16 bits (half an ulp; once more
// where a bias is added to an already rounded output) plus float32 summation-order noise:
//   bfloat16: rtol 2^-7 (one ulp of 8 significant bits), atol 1e-2 * max |reference|
//   float16:  rtol 2^-10 (one ulp of 11 significant bits), atol 2e-3 * max |reference|
//   float32:  rtol 1e-4, atol 1e-6 per term of the reduction (tests/ops/test_cuda_conv2d.cpp)
// The output-scale term is far below what 16-bit accumulation would cost on the long sums used
// here (k = 4096, 8192-term weight gradients: errors of several percent of the scale), so these
// tests also show that the sums run in float32. A NaN or infinity never passes (the references
// are finite), and the message names the op, dtype, layout, shape and the first bad elements.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <exception>
#include <string>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "cuda_test_support.h"
#include "half_test_support.h"
#include "ops/conv2d.h"
#include "tests/nan_safe_max.h"

namespace sublet::ops::testing {

inline double as_double(float v) { return v; }
inline double as_double(BFloat16 v) { return static_cast<float>(v); }
inline double as_double(Float16 v) { return static_cast<float>(v); }

struct Tolerance {
  double rtol = 0, atol = 0;
};

inline double max_abs(const std::vector<float>& values) {
  double m = 0;
  for (float v : values) m = sublet::testing::nan_safe_max(m, static_cast<double>(std::abs(v)));
  return m;
}

// The tolerance of a result of type T whose elements are sums of `terms` products.
template <typename T>
Tolerance tolerance_for(const std::vector<float>& reference, double terms) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return {0x1p-7, 1e-2 * max_abs(reference)};
  } else if constexpr (std::is_same_v<T, Float16>) {
    return {0x1p-10, 2e-3 * max_abs(reference)};
  } else {
    return {1e-4, 1e-6 * terms};
  }
}

template <typename T>
void expect_near_reference(const std::vector<T>& got, const std::vector<float>& reference, Tolerance tol,
                           const std::string& what) {
  ASSERT_EQ(got.size(), reference.size()) << what;
  std::size_t bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const double g = as_double(got[i]), r = reference[i];
    const double diff = std::abs(g - r);
    // Written so that NaN fails: !(NaN <= x) is true.
    if (!(std::isfinite(g) && diff <= tol.rtol * std::abs(r) + tol.atol)) {
      if (bad < 5) ADD_FAILURE() << what << " [" << i << "]: got " << g << ", reference " << r << " (|diff| " << diff << ")";
      ++bad;
    }
    worst = sublet::testing::nan_safe_max(worst, diff);
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << reference.size() << " elements outside rtol " << tol.rtol
                     << ", atol " << tol.atol << " (largest |diff| " << worst << ", max |reference| "
                     << max_abs(reference) << ")";
}

// Dense (d0, d1, d2, d3) <-> (d0, d2, d3, d1): NCHW <-> NHWC of activations, and
// [OC, C/g, KH, KW] <-> [OC, KH, KW, C/g] of a weight.
template <typename T>
std::vector<T> to_channels_last(const std::vector<T>& nchw, std::int64_t n, std::int64_t c, std::int64_t h,
                                std::int64_t w) {
  std::vector<T> out(nchw.size());
  for (std::int64_t in = 0; in < n; ++in)
    for (std::int64_t ic = 0; ic < c; ++ic)
      for (std::int64_t ih = 0; ih < h; ++ih)
        for (std::int64_t iw = 0; iw < w; ++iw)
          out[static_cast<std::size_t>(((in * h + ih) * w + iw) * c + ic)] =
              nchw[static_cast<std::size_t>(((in * c + ic) * h + ih) * w + iw)];
  return out;
}

template <typename T>
std::vector<T> from_channels_last(const std::vector<T>& nhwc, std::int64_t n, std::int64_t c, std::int64_t h,
                                  std::int64_t w) {
  std::vector<T> out(nhwc.size());
  for (std::int64_t in = 0; in < n; ++in)
    for (std::int64_t ic = 0; ic < c; ++ic)
      for (std::int64_t ih = 0; ih < h; ++ih)
        for (std::int64_t iw = 0; iw < w; ++iw)
          out[static_cast<std::size_t>(((in * c + ic) * h + ih) * w + iw)] =
              nhwc[static_cast<std::size_t>(((in * h + ih) * w + iw) * c + ic)];
  return out;
}

// A conv2d call's operands and results, always in NCHW / [OC, C/g, KH, KW] order on the host.
template <typename T>
struct ConvData {
  std::vector<T> input, weight, bias, grad_output;
};
template <typename T>
struct ConvResults {
  std::vector<T> output, grad_input, grad_weight, grad_bias;
};

// "bfloat16 channels_last N2 C8 10x10 -> OC16 k3x3 s1 p1 d1 g1"
inline std::string describe(const Conv2dShape& s, DType dtype, MemoryFormat format) {
  const auto n = [](std::int64_t v) { return std::to_string(v); };
  return std::string(dtype_name(dtype)) + " " + memory_format_name(format) + " N" + n(s.batch) + " C" +
         n(s.in_channels) + " " + n(s.in_height) + "x" + n(s.in_width) + " -> OC" + n(s.out_channels) + " k" +
         n(s.kernel_h) + "x" + n(s.kernel_w) + " s" + n(s.stride_h) + "x" + n(s.stride_w) + " p" + n(s.pad_h) + "x" +
         n(s.pad_w) + " d" + n(s.dilation_h) + "x" + n(s.dilation_w) + " g" + n(s.groups);
}

// The float32 CPU kernels (NCHW): the reference.
inline ConvResults<float> cpu_conv(const Conv2dShape& s, const ConvData<float>& d, bool with_bias) {
  const Context cpu = Context::for_device(Device::cpu());
  ConvResults<float> r;
  r.output.resize(s.output_numel());
  r.grad_input.resize(s.input_numel());
  r.grad_weight.resize(s.weight_numel());
  r.grad_bias.resize(with_bias ? s.out_channels : 0);
  conv2d_forward(cpu, s, DType::Float32, d.input.data(), d.weight.data(), with_bias ? d.bias.data() : nullptr,
                 r.output.data());
  conv2d_backward_input(cpu, s, DType::Float32, d.grad_output.data(), d.weight.data(), r.grad_input.data());
  conv2d_backward_weight(cpu, s, DType::Float32, d.grad_output.data(), d.input.data(), r.grad_weight.data(),
                         with_bias ? r.grad_bias.data() : nullptr);
  return r;
}

// The GPU kernels for `format`: channels-last operands are permuted on the host before the
// upload and the results permuted back, so the caller always sees NCHW.
template <typename T>
ConvResults<T> gpu_conv(Conv2dShape s, MemoryFormat format, const ConvData<T>& d, bool with_bias) {
  s.format = format;
  const bool last = format == MemoryFormat::ChannelsLast;
  const std::int64_t cg = s.in_channels / s.groups, oh = s.out_height(), ow = s.out_width();
  const auto activations_in = [&](const std::vector<T>& v, std::int64_t c, std::int64_t h, std::int64_t w) {
    return last ? to_channels_last(v, s.batch, c, h, w) : v;
  };
  const auto activations_out = [&](const std::vector<T>& v, std::int64_t c, std::int64_t h, std::int64_t w) {
    return last ? from_channels_last(v, s.batch, c, h, w) : v;
  };
  const std::vector<T> weight =
      last ? to_channels_last(d.weight, s.out_channels, cg, s.kernel_h, s.kernel_w) : d.weight;
  DeviceBuffer<T> input(activations_in(d.input, s.in_channels, s.in_height, s.in_width)), w(weight),
      bias(d.bias.empty() ? std::vector<T>(1) : d.bias),
      grad_output(activations_in(d.grad_output, s.out_channels, oh, ow));
  DeviceBuffer<T> output(s.output_numel()), grad_input(s.input_numel()), grad_weight(s.weight_numel()),
      grad_bias(s.out_channels);
  const DType dtype = DTypeOf<T>::value;
  const Context ctx = gpu_context();
  conv2d_forward(ctx, s, dtype, input.get(), w.get(), with_bias ? bias.get() : nullptr, output.get());
  conv2d_backward_input(ctx, s, dtype, grad_output.get(), w.get(), grad_input.get());
  conv2d_backward_weight(ctx, s, dtype, grad_output.get(), input.get(), grad_weight.get(),
                         with_bias ? grad_bias.get() : nullptr);
  ConvResults<T> r;
  r.output = activations_out(output.download(), s.out_channels, oh, ow);
  r.grad_input = activations_out(grad_input.download(), s.in_channels, s.in_height, s.in_width);
  r.grad_weight = grad_weight.download();
  if (last) r.grad_weight = from_channels_last(r.grad_weight, s.out_channels, cg, s.kernel_h, s.kernel_w);
  if (with_bias) r.grad_bias = grad_bias.download();
  return r;
}

// Seeded uniform [-1, 1) values rounded to T, as T (for the GPU) and as float32 (the reference's
// inputs: the same values exactly).
template <typename T>
struct RoundedValues {
  std::vector<T> typed;
  std::vector<float> exact;
};
template <typename T>
RoundedValues<T> rounded_values(std::int64_t count, std::uint64_t seed) {
  RoundedValues<T> r;
  for (float v : random_values<float>(count, seed)) {
    const T t(v);
    r.typed.push_back(t);
    r.exact.push_back(static_cast<float>(t));
  }
  return r;
}

template <typename T>
ConvResults<float> as_float(const ConvResults<T>& r) {
  const auto convert = [](const std::vector<T>& v) {
    std::vector<float> out;
    out.reserve(v.size());
    for (const T& x : v) out.push_back(static_cast<float>(as_double(x)));
    return out;
  };
  return {convert(r.output), convert(r.grad_input), convert(r.grad_weight), convert(r.grad_bias)};
}

inline Conv2dShape conv_shape(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t oc,
                              std::int64_t kh, std::int64_t kw, std::int64_t stride, std::int64_t pad,
                              std::int64_t dilation = 1, std::int64_t groups = 1) {
  Conv2dShape s;
  s.batch = n, s.in_channels = c, s.in_height = h, s.in_width = w;
  s.out_channels = oc, s.kernel_h = kh, s.kernel_w = kw;
  s.stride_h = s.stride_w = stride, s.pad_h = s.pad_w = pad;
  s.dilation_h = s.dilation_w = dilation, s.groups = groups;
  return s;
}

// The shapes both conv2d test files run: 3x3 and 1x1, stride 2, padding, odd sizes and channel
// counts (cuDNN's fallback engines), groups and depthwise, dilation, channel counts that are
// multiples of 8 (the tensor-core NHWC engines), and an 8192-term weight gradient.
inline std::vector<Conv2dShape> low_precision_conv_shapes() {
  return {
      conv_shape(2, 8, 10, 10, 16, 3, 3, 1, 1),        // 3x3, same padding
      conv_shape(3, 5, 9, 7, 7, 3, 3, 2, 1),           // odd sizes and channels, stride 2
      conv_shape(2, 16, 8, 8, 8, 1, 1, 1, 0),          // 1x1
      conv_shape(2, 8, 7, 9, 12, 1, 1, 2, 0),          // 1x1 stride 2 (a ResNet downsample), odd sizes
      conv_shape(2, 8, 8, 8, 8, 3, 3, 1, 1, 1, 2),     // groups 2
      conv_shape(2, 8, 9, 9, 8, 3, 3, 2, 1, 1, 8),     // depthwise, stride 2
      conv_shape(2, 4, 9, 8, 6, 3, 3, 1, 2, 2),        // dilation 2
      conv_shape(4, 64, 14, 14, 64, 3, 3, 1, 1),       // ResNet-like
      conv_shape(8, 8, 32, 32, 8, 3, 3, 1, 1),         // weight gradient sums 8 * 32 * 32 = 8192 terms
  };
}

// Runs one case; an exception (e.g. cuDNN refusing a shape) becomes a failure naming the case,
// and the remaining cases still run, so one GPU run reports every shape that fails.
template <typename F>
void run_case(const std::string& what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << " threw: " << e.what();
  }
}

// Checks every result of a GPU run against the reference; `scale` widens the tolerance (2 when
// two GPU results, each within the tolerance of the reference, are compared with each other).
template <typename T>
void expect_conv_near(const Conv2dShape& s, const ConvResults<T>& got, const ConvResults<float>& ref,
                      const std::string& what, double scale = 1.0) {
  const auto widen = [scale](Tolerance t) { return Tolerance{t.rtol * scale, t.atol * scale}; };
  const double window = static_cast<double>(s.kernel_h * s.kernel_w);
  const double pixels = static_cast<double>(s.batch * s.out_height() * s.out_width());
  expect_near_reference(got.output, ref.output,
                        widen(tolerance_for<T>(ref.output, window * (s.in_channels / s.groups) + 1)), what + " output");
  expect_near_reference(got.grad_input, ref.grad_input,
                        widen(tolerance_for<T>(ref.grad_input, window * (s.out_channels / s.groups))),
                        what + " grad_input");
  expect_near_reference(got.grad_weight, ref.grad_weight, widen(tolerance_for<T>(ref.grad_weight, pixels)),
                        what + " grad_weight");
  if (!ref.grad_bias.empty()) {
    expect_near_reference(got.grad_bias, ref.grad_bias, widen(tolerance_for<T>(ref.grad_bias, pixels)),
                          what + " grad_bias");
  }
}

}  // namespace sublet::ops::testing
