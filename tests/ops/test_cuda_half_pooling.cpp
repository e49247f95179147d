// Pooling on CUDA (ops/cuda/pooling.cu) for bfloat16/float16 NCHW against the float32 CPU kernels
// on the same 16-bit-rounded inputs, and channels-last (NHWC, permuted on the host) against NCHW
// on the GPU for float32, bfloat16 and float16: max pooling (values, int64 indices h * W + w
// within the plane, gradients), average pooling (with and without counting the padding) and
// adaptive average pooling, forward and backward, at odd sizes, with dilation, batch 1 with a
// large image, 2048 channels of 7x7.
// Tolerances: 16-bit max-pooling values and indices are exact (a maximum is one of the inputs;
// ties go to the first in the window on both sides); the 16-bit sums (max/avg/adaptive backward,
// avg/adaptive forward) are float32 sums rounded once, held to one ulp of the 16-bit type plus
// 1e-3 (bfloat16) / 2e-4 (float16) of the output's scale (layout_test_support.h). Channels-last
// against NCHW is bit for bit: the same float32 operations in the same order, only the addresses
// differ. NaN fails (or must match a NaN where the CPU has one).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "layout_test_support.h"
#include "max_pool_test_support.h"
#include "core/errors.h"
#include "ops/cuda/max_pool_channels_last.h"
#include "ops/cuda/pooling_cuda.h"
#include "ops/pooling.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

Pool2dShape pool(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k, std::int64_t stride,
                 std::int64_t pad, std::int64_t dilation = 1) {
  Pool2dShape s;
  s.batch = n, s.channels = c, s.in_height = h, s.in_width = w;
  s.kernel_h = k, s.kernel_w = k, s.stride_h = stride, s.stride_w = stride, s.pad_h = pad, s.pad_w = pad;
  s.dilation_h = dilation, s.dilation_w = dilation;
  return s;
}

std::string describe(const Pool2dShape& s) {
  return "[" + std::to_string(s.batch) + "," + std::to_string(s.channels) + "," + std::to_string(s.in_height) + "," +
         std::to_string(s.in_width) + "] kernel " + std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) +
         " stride " + std::to_string(s.stride_h) + "x" + std::to_string(s.stride_w) + " pad " +
         std::to_string(s.pad_h) + "x" + std::to_string(s.pad_w) + " dilation " + std::to_string(s.dilation_h) + "x" +
         std::to_string(s.dilation_w) + " " + format_name(s.format);
}

std::vector<Pool2dShape> max_shapes() {
  Pool2dShape uneven = pool(1, 5, 13, 12, 3, 1, 1, 2);
  uneven.kernel_w = 2, uneven.stride_w = 2, uneven.dilation_w = 1;
  return {pool(2, 3, 11, 9, 3, 2, 1), uneven, pool(1, 3, 200, 190, 2, 2, 0), pool(2, 2048, 7, 7, 3, 1, 1),
          pool(2, 37, 28, 28, 3, 2, 1)};
}

std::vector<Pool2dShape> avg_shapes() {
  return {pool(2, 3, 11, 9, 3, 2, 1), pool(1, 3, 200, 190, 2, 2, 0), pool(2, 2048, 7, 7, 7, 1, 0),
          pool(2, 37, 15, 14, 4, 3, 2)};
}

std::vector<AdaptivePool2dShape> adaptive_shapes() {
  return {{2, 2048, 7, 7, 1, 1}, {2, 5, 13, 11, 4, 3}, {1, 3, 100, 90, 7, 7}, {2, 37, 5, 6, 10, 8}};
}

// Inputs rounded to H, with ties (every 7th value rounded to an integer) and, for max pooling,
// a NaN and infinities, as the float32 tests.
template <typename H>
std::vector<float> pool_input(std::int64_t count, std::uint64_t seed, bool specials) {
  auto values = random_values<float>(count, seed);
  for (std::size_t i = 0; i < values.size(); i += 7) values[i] = std::round(values[i]);
  if (specials && values.size() > 40) {
    values[13] = std::numeric_limits<float>::quiet_NaN();
    values[29] = std::numeric_limits<float>::infinity();
    values[37] = -std::numeric_limits<float>::infinity();
  }
  return rounded_to<H>(values);
}

// ---- 16-bit NCHW against the float32 CPU ----------------------------------------------------------

template <typename H>
void max_against_cpu(const Pool2dShape& s, cuda::PoolIndexing indexing) {
  SCOPED_TRACE(storage_name<H>() + " max_pool2d " + describe(s) +
               (indexing == cuda::PoolIndexing::Wide ? " (64-bit kernels)" : ""));
  const auto input = pool_input<H>(s.input_numel(), 201, true);
  const auto grad_output = rounded_to<H>(random_values<float>(s.output_numel(), 202));
  std::vector<float> out(s.output_numel()), grad_input(s.input_numel());
  std::vector<std::int64_t> indices(s.output_numel());
  max_pool2d_forward(cpu_context(), s, DType::Float32, input.data(), out.data(), indices.data());
  max_pool2d_backward(cpu_context(), s, DType::Float32, grad_output.data(), indices.data(), grad_input.data());

  const DType dtype = DTypeOf<H>::value;
  DeviceBuffer<H> d_input(to_storage<H>(input)), d_out(s.output_numel()), d_grad_output(to_storage<H>(grad_output));
  DeviceBuffer<H> d_grad_input(s.input_numel());
  DeviceBuffer<std::int64_t> d_indices(s.output_numel());
  cuda::max_pool2d_forward(gpu_context(), s, dtype, d_input.get(), d_out.get(), d_indices.get(), indexing);
  cuda::max_pool2d_backward(gpu_context(), s, dtype, d_grad_output.get(), d_indices.get(), d_grad_input.get(),
                            indexing);
  expect_half_close(d_out.download(), out, 0, 0, "max values (exact)");
  expect_equal(d_indices.download(), indices, "max indices");
  expect_activation_close(d_grad_input.download(), grad_input, "max grad_input");
}

template <typename H>
void avg_against_cpu(const Pool2dShape& s, bool count_include_pad) {
  SCOPED_TRACE(storage_name<H>() + " avg_pool2d " + describe(s) + (count_include_pad ? " counting padding" : ""));
  const auto input = pool_input<H>(s.input_numel(), 203, false);
  const auto grad_output = rounded_to<H>(random_values<float>(s.output_numel(), 204));
  std::vector<float> out(s.output_numel()), grad_input(s.input_numel());
  avg_pool2d_forward(cpu_context(), s, DType::Float32, input.data(), out.data(), count_include_pad);
  avg_pool2d_backward(cpu_context(), s, DType::Float32, grad_output.data(), grad_input.data(), count_include_pad);
  const DType dtype = DTypeOf<H>::value;
  DeviceBuffer<H> d_input(to_storage<H>(input)), d_out(s.output_numel()), d_grad_output(to_storage<H>(grad_output));
  DeviceBuffer<H> d_grad_input(s.input_numel());
  avg_pool2d_forward(gpu_context(), s, dtype, d_input.get(), d_out.get(), count_include_pad);
  avg_pool2d_backward(gpu_context(), s, dtype, d_grad_output.get(), d_grad_input.get(), count_include_pad);
  expect_activation_close(d_out.download(), out, "avg output");
  expect_activation_close(d_grad_input.download(), grad_input, "avg grad_input");
}

template <typename H>
void adaptive_against_cpu(const AdaptivePool2dShape& s) {
  SCOPED_TRACE(storage_name<H>() + " adaptive_avg_pool2d [" + std::to_string(s.batch) + "," +
               std::to_string(s.channels) + "," + std::to_string(s.in_height) + "," + std::to_string(s.in_width) +
               "] -> " + std::to_string(s.out_height) + "x" + std::to_string(s.out_width));
  const auto input = pool_input<H>(s.input_numel(), 205, false);
  const auto grad_output = rounded_to<H>(random_values<float>(s.output_numel(), 206));
  std::vector<float> out(s.output_numel()), grad_input(s.input_numel());
  adaptive_avg_pool2d_forward(cpu_context(), s, DType::Float32, input.data(), out.data());
  adaptive_avg_pool2d_backward(cpu_context(), s, DType::Float32, grad_output.data(), grad_input.data());
  const DType dtype = DTypeOf<H>::value;
  DeviceBuffer<H> d_input(to_storage<H>(input)), d_out(s.output_numel()), d_grad_output(to_storage<H>(grad_output));
  DeviceBuffer<H> d_grad_input(s.input_numel());
  adaptive_avg_pool2d_forward(gpu_context(), s, dtype, d_input.get(), d_out.get());
  adaptive_avg_pool2d_backward(gpu_context(), s, dtype, d_grad_output.get(), d_grad_input.get());
  expect_activation_close(d_out.download(), out, "adaptive output");
  expect_activation_close(d_grad_input.download(), grad_input, "adaptive grad_input");
}

template <typename H>
void all_against_cpu() {
  for (const Pool2dShape& s : max_shapes()) {
    max_against_cpu<H>(s, cuda::PoolIndexing::Auto);
    max_against_cpu<H>(s, cuda::PoolIndexing::Wide);
  }
  for (const Pool2dShape& s : avg_shapes()) {
    avg_against_cpu<H>(s, true);
    avg_against_cpu<H>(s, false);
  }
  for (const AdaptivePool2dShape& s : adaptive_shapes()) adaptive_against_cpu<H>(s);
}

// ---- channels-last against NCHW on the GPU --------------------------------------------------------

// Runs `op(shape, input, output, grad_output, grad_input)` NCHW and channels-last on the same
// values and compares both results bit for bit after permuting back.
template <typename H, typename Shape, typename Op>
void layouts_agree(Shape s, std::int64_t in_h, std::int64_t in_w, std::int64_t out_h, std::int64_t out_w,
                   bool specials, const std::string& what, Op&& op) {
  SCOPED_TRACE(storage_name<H>() + " " + what + ": channels-last against NCHW");
  const std::int64_t n = s.batch, c = s.channels;
  const auto input = to_storage<H>(pool_input<H>(n * c * in_h * in_w, 207, specials));
  const auto grad_output = to_storage<H>(rounded_to<H>(random_values<float>(n * c * out_h * out_w, 208)));
  struct Result {
    std::vector<H> output, grad_input;
    std::vector<std::int64_t> indices;
  };
  auto run = [&](MemoryFormat format) {
    s.format = format;
    DeviceBuffer<H> d_input(to_layout(input, format, n, c, in_h, in_w));
    DeviceBuffer<H> d_grad_output(to_layout(grad_output, format, n, c, out_h, out_w));
    DeviceBuffer<H> d_out(n * c * out_h * out_w), d_grad_input(n * c * in_h * in_w);
    DeviceBuffer<std::int64_t> d_indices(n * c * out_h * out_w);
    op(s, d_input.get(), d_out.get(), d_indices.get(), d_grad_output.get(), d_grad_input.get());
    return Result{from_layout(d_out.download(), format, n, c, out_h, out_w),
                  from_layout(d_grad_input.download(), format, n, c, in_h, in_w),
                  from_layout(d_indices.download(), format, n, c, out_h, out_w)};
  };
  const Result nchw = run(MemoryFormat::Contiguous), last = run(MemoryFormat::ChannelsLast);
  expect_bits_equal(last.output, nchw.output, what + " output");
  expect_bits_equal(last.grad_input, nchw.grad_input, what + " grad_input");
  expect_equal(last.indices, nchw.indices, what + " indices (unused ones are uninitialised on both sides)");
}

template <typename H>
void all_layouts_agree() {
  const DType dtype = DTypeOf<H>::value;
  const Context gpu = gpu_context();
  for (const Pool2dShape& shape : max_shapes()) {
    layouts_agree<H>(shape, shape.in_height, shape.in_width, shape.out_height(), shape.out_width(), true,
                     "max_pool2d " + describe(shape),
                     [&](const Pool2dShape& s, H* in, H* out, std::int64_t* indices, H* grad_out, H* grad_in) {
                       max_pool2d_forward(gpu, s, dtype, in, out, indices);
                       max_pool2d_backward(gpu, s, dtype, grad_out, indices, grad_in);
                     });
    // The same through the 64-bit kernels (tensors of 2^31 elements and more), both layouts.
    layouts_agree<H>(shape, shape.in_height, shape.in_width, shape.out_height(), shape.out_width(), true,
                     "max_pool2d (64-bit kernels) " + describe(shape),
                     [&](const Pool2dShape& s, H* in, H* out, std::int64_t* indices, H* grad_out, H* grad_in) {
                       cuda::max_pool2d_forward(gpu, s, dtype, in, out, indices, cuda::PoolIndexing::Wide);
                       cuda::max_pool2d_backward(gpu, s, dtype, grad_out, indices, grad_in, cuda::PoolIndexing::Wide);
                     });
  }
  for (const Pool2dShape& shape : avg_shapes()) {
    for (const bool include_pad : {true, false}) {
      layouts_agree<H>(shape, shape.in_height, shape.in_width, shape.out_height(), shape.out_width(), false,
                       "avg_pool2d " + describe(shape) + (include_pad ? " counting padding" : ""),
                       [&](const Pool2dShape& s, H* in, H* out, std::int64_t* indices, H* grad_out, H* grad_in) {
                         // Indices unused: zeros on both sides, so that they compare equal.
                         std::vector<std::int64_t> zeros(s.output_numel(), 0);
                         copy_bytes(gpu.device, indices, Device::cpu(), zeros.data(), zeros.size() * sizeof(zeros[0]));
                         avg_pool2d_forward(gpu, s, dtype, in, out, include_pad);
                         avg_pool2d_backward(gpu, s, dtype, grad_out, grad_in, include_pad);
                       });
    }
  }
  for (const AdaptivePool2dShape& shape : adaptive_shapes()) {
    layouts_agree<H>(shape, shape.in_height, shape.in_width, shape.out_height, shape.out_width, false,
                     "adaptive_avg_pool2d " + std::to_string(shape.in_height) + "x" + std::to_string(shape.in_width) +
                         " -> " + std::to_string(shape.out_height) + "x" + std::to_string(shape.out_width) +
                         " channels " + std::to_string(shape.channels),
                     [&](const AdaptivePool2dShape& s, H* in, H* out, std::int64_t* indices, H* grad_out, H* grad_in) {
                       std::vector<std::int64_t> zeros(s.output_numel(), 0);
                       copy_bytes(gpu.device, indices, Device::cpu(), zeros.data(), zeros.size() * sizeof(zeros[0]));
                       adaptive_avg_pool2d_forward(gpu, s, dtype, in, out);
                       adaptive_avg_pool2d_backward(gpu, s, dtype, grad_out, grad_in);
                     });
  }
}

// ---- channels-last max pooling through every kernel, bit for bit against the CPU ---------------

// Channels-last max pooling of type H against the CPU kernel of the same dtype (16-bit types
// through the CPU's float32 kernel, rounded once, as the GPU computes), bit for bit: values,
// int64 indices or window positions, gradients; through every kernel (PoolIndexing Auto, Scalar,
// Wide) and both kinds of saved argmax. `shift` places every activation that many elements past
// its buffer's start (1: misaligned, so that Auto must leave the vectorised kernels).
template <typename H>
void channels_last_max_exact(const Pool2dShape& shape, std::uint64_t seed, std::size_t shift = 0) {
  Pool2dShape s = shape;
  s.format = MemoryFormat::Contiguous;
  SCOPED_TRACE(storage_name<H>() + " channels-last max_pool2d " + describe(s) + " shift " + std::to_string(shift));
  const DType dtype = DTypeOf<H>::value;
  const std::int64_t n = s.batch, c = s.channels, h = s.in_height, w = s.in_width;
  const std::int64_t oh = s.out_height(), ow = s.out_width();
  const auto input = to_storage<H>(tied_input(s.input_numel(), seed));
  auto grad_values = rounded_to<H>(random_values<float>(s.output_numel(), seed + 1));
  for (std::size_t i = 0; i < grad_values.size(); i += 11) grad_values[i] = 0.25f;  // exact sums of ties
  const auto grad_output = to_storage<H>(grad_values);

  const Context cpu = cpu_context();
  std::vector<H> out(s.output_numel()), grad_input(s.input_numel());
  std::vector<std::int64_t> indices(s.output_numel());
  max_pool2d_forward(cpu, s, dtype, input.data(), out.data(), indices.data());
  max_pool2d_backward(cpu, s, dtype, grad_output.data(), indices.data(), grad_input.data());
  const std::vector<std::uint8_t> positions = positions_of(s, indices);

  s.format = MemoryFormat::ChannelsLast;
  const bool vectorised_shape = c % static_cast<std::int64_t>(16 / sizeof(H)) == 0;
  auto padded = [&](const std::vector<H>& nchw, std::int64_t hh, std::int64_t ww) {
    std::vector<H> data(shift, H{});
    const auto nhwc = nchw_to_nhwc(nchw, n, c, hh, ww);
    data.insert(data.end(), nhwc.begin(), nhwc.end());
    return data;
  };
  DeviceBuffer<H> d_input(padded(input, h, w)), d_grad_output(padded(grad_output, oh, ow));
  DeviceBuffer<H> d_out(shift + s.output_numel()), d_grad_input(shift + s.input_numel());
  DeviceBuffer<std::int64_t> d_indices(s.output_numel());
  DeviceBuffer<std::uint8_t> d_positions(s.output_numel());
  H* const x = d_input.get() + shift;
  H* const y = d_out.get() + shift;
  H* const gy = d_grad_output.get() + shift;
  H* const gx = d_grad_input.get() + shift;
  auto values = [&](const DeviceBuffer<H>& buffer, std::int64_t hh, std::int64_t ww) {
    std::vector<H> all = buffer.download();
    all.erase(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(shift));
    return nhwc_to_nchw(all, n, c, hh, ww);
  };
  const Context gpu = gpu_context();
  for (const cuda::PoolIndexing indexing :
       {cuda::PoolIndexing::Auto, cuda::PoolIndexing::Scalar, cuda::PoolIndexing::Wide}) {
    const std::string kernels = indexing == cuda::PoolIndexing::Auto
                                    ? (vectorised_shape && shift == 0 ? "vectorised" : "auto (scalar)")
                                    : (indexing == cuda::PoolIndexing::Scalar ? "scalar 32-bit" : "64-bit");
    if (indexing == cuda::PoolIndexing::Auto) {
      EXPECT_EQ(cuda::max_pool_vectorized_fits(s, dtype, x, y, d_indices.get(), sizeof(std::int64_t)),
                vectorised_shape && shift == 0);
      EXPECT_EQ(cuda::max_pool_vectorized_fits(s, dtype, gy, gx, d_positions.get(), 1), vectorised_shape && shift == 0);
    }
    cuda::max_pool2d_forward(gpu, s, dtype, x, y, d_indices.get(), indexing);
    cuda::max_pool2d_backward(gpu, s, dtype, gy, d_indices.get(), gx, indexing);
    expect_bits_equal(values(d_out, oh, ow), out, kernels + " int64: values");
    expect_equal(nhwc_to_nchw(d_indices.download(), n, c, oh, ow), indices, kernels + " int64: indices");
    expect_bits_equal(values(d_grad_input, h, w), grad_input, kernels + " int64: grad_input");

    if (indexing == cuda::PoolIndexing::Auto) {  // through ops/pooling.h and the kernel table
      ASSERT_TRUE(max_pool2d_has_positions(gpu, s, dtype));
      max_pool2d_forward_positions(gpu, s, dtype, x, y, d_positions.get());
      max_pool2d_backward_positions(gpu, s, dtype, gy, d_positions.get(), gx);
    } else {
      cuda::max_pool2d_forward_positions(gpu, s, dtype, x, y, d_positions.get(), indexing);
      cuda::max_pool2d_backward_positions(gpu, s, dtype, gy, d_positions.get(), gx, indexing);
    }
    expect_bits_equal(values(d_out, oh, ow), out, kernels + " positions: values");
    expect_equal(nhwc_to_nchw(d_positions.download(), n, c, oh, ow), positions, kernels + " positions");
    expect_bits_equal(values(d_grad_input, h, w), grad_input, kernels + " positions: grad_input");
  }
}

// Vectorised shapes (channels a multiple of 8 for 16-bit, 4 for float32) and the others.
std::vector<Pool2dShape> channels_last_max_shapes() {
  Pool2dShape uneven = pool(2, 24, 13, 17, 3, 2, 1);
  uneven.kernel_w = 2, uneven.stride_w = 3;  // 3x2 kernel, stride (2, 3)
  Pool2dShape gaps = pool(1, 16, 10, 14, 2, 3, 0);
  gaps.stride_w = 4, gaps.pad_w = 1;  // strides larger than the kernel: inputs no window covers
  Pool2dShape dilated = pool(2, 16, 12, 10, 3, 1, 1, 2);
  dilated.dilation_w = 3;
  Pool2dShape widest = pool(1, 8, 20, 19, 16, 2, 8);  // 256 taps: positions up to 255
  return {pool(2, 64, 15, 13, 3, 2, 1), pool(3, 8, 9, 11, 2, 2, 0), dilated, uneven, gaps, widest,
          pool(2, 12, 7, 9, 3, 2, 1),   pool(2, 5, 11, 9, 3, 2, 1), pool(1, 8, 1, 1, 1, 1, 0),
          pool(2, 3, 1, 1, 1, 1, 0),    pool(2, 2048, 7, 7, 3, 1, 1), pool(1, 40, 6, 6, 3, 3, 1)};
}

template <typename H>
void all_channels_last_max_exact() {
  std::uint64_t seed = 300;
  for (const Pool2dShape& s : channels_last_max_shapes()) channels_last_max_exact<H>(s, seed += 2);
  channels_last_max_exact<H>(pool(2, 64, 15, 13, 3, 2, 1), 350, 1);  // misaligned: the scalar kernels
  // The ResNet stem's pooling (3x3, stride 2, padding 1, 112x112 -> 56x56) at batch 4.
  channels_last_max_exact<H>(pool(4, 64, 112, 112, 3, 2, 1), 360);
}

}  // namespace

TEST(CudaHalfPooling, BFloat16MatchesTheFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("bfloat16 pooling against the float32 CPU kernels");
  all_against_cpu<BFloat16>();
}

TEST(CudaHalfPooling, Float16MatchesTheFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("float16 pooling against the float32 CPU kernels");
  all_against_cpu<Float16>();
}

TEST(CudaChannelsLastPooling, Float32MatchesNchwBitForBit) {
  SUBLET_SKIP_WITHOUT_GPU("channels-last float32 pooling against NCHW");
  all_layouts_agree<float>();
}

TEST(CudaChannelsLastPooling, BFloat16MatchesNchwBitForBit) {
  SUBLET_SKIP_WITHOUT_GPU("channels-last bfloat16 pooling against NCHW");
  all_layouts_agree<BFloat16>();
}

TEST(CudaChannelsLastPooling, Float16MatchesNchwBitForBit) {
  SUBLET_SKIP_WITHOUT_GPU("channels-last float16 pooling against NCHW");
  all_layouts_agree<Float16>();
}

TEST(CudaChannelsLastPooling, MaxPoolEveryKernelMatchesTheCpuBitForBitFloat32) {
  SUBLET_SKIP_WITHOUT_GPU("channels-last float32 max pooling against the CPU");
  all_channels_last_max_exact<float>();
}

TEST(CudaChannelsLastPooling, MaxPoolEveryKernelMatchesTheCpuBitForBitBFloat16) {
  SUBLET_SKIP_WITHOUT_GPU("channels-last bfloat16 max pooling against the CPU");
  all_channels_last_max_exact<BFloat16>();
}

TEST(CudaChannelsLastPooling, MaxPoolEveryKernelMatchesTheCpuBitForBitFloat16) {
  SUBLET_SKIP_WITHOUT_GPU("channels-last float16 max pooling against the CPU");
  all_channels_last_max_exact<Float16>();
}

TEST(CudaChannelsLastPooling, WindowPositionsNeedAtMost256Taps) {
  SUBLET_SKIP_WITHOUT_GPU("the window-position kernels' limit");
  Pool2dShape s = pool(1, 8, 20, 20, 17, 1, 0);
  s.format = MemoryFormat::ChannelsLast;
  EXPECT_FALSE(max_pool2d_has_positions(gpu_context(), s, DType::BFloat16));
  DeviceBuffer<BFloat16> d_in(s.input_numel()), d_out(s.output_numel());
  DeviceBuffer<std::uint8_t> d_positions(s.output_numel());
  try {
    max_pool2d_forward_positions(gpu_context(), s, DType::BFloat16, d_in.get(), d_out.get(), d_positions.get());
    ADD_FAILURE() << "a 17x17 window was accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("at most 256 taps, got kernel 17x17"), std::string::npos) << e.what();
  }
  s.kernel_w = 15;  // 255 taps
  EXPECT_TRUE(max_pool2d_has_positions(gpu_context(), s, DType::BFloat16));
}

TEST(CudaChannelsLastPooling, MaxIndicesAreWithinThePlane) {
  SUBLET_SKIP_WITHOUT_GPU("channels-last max-pooling index semantics");
  // One plane per (n, c), values increasing along w then h: every window's maximum is its
  // bottom-right element, whose index is h * W + w whatever the channel and sample.
  Pool2dShape s = pool(2, 3, 4, 6, 2, 2, 0);
  s.format = MemoryFormat::ChannelsLast;
  std::vector<float> nchw(s.input_numel());
  for (std::size_t i = 0; i < nchw.size(); ++i) nchw[i] = static_cast<float>(i % (4 * 6));
  DeviceBuffer<float> d_in(nchw_to_nhwc(nchw, 2, 3, 4, 6)), d_out(s.output_numel());
  DeviceBuffer<std::int64_t> d_indices(s.output_numel());
  max_pool2d_forward(gpu_context(), s, DType::Float32, d_in.get(), d_out.get(), d_indices.get());
  const std::vector<std::int64_t> indices = nhwc_to_nchw(d_indices.download(), 2, 3, 2, 3);
  std::vector<std::int64_t> expected;
  for (int plane = 0; plane < 6; ++plane) {
    for (int oh = 0; oh < 2; ++oh) {
      for (int ow = 0; ow < 3; ++ow) expected.push_back((2 * oh + 1) * 6 + (2 * ow + 1));
    }
  }
  expect_equal(indices, expected, "channels-last max indices");
}
