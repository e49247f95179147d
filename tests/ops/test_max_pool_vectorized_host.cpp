// The channels-last vectorised max-pooling work items (ops/cuda/max_pool_channels_last.cuh)
// compiled for the host and run over every work item on the CPU, against the CPU kernel of the
// same dtype (16-bit types through the CPU's float32 kernel, rounded once) bit for bit: values,
// int64 indices and one-byte window positions, gradients through either. Ties, NaNs of both
// signs, infinities, zeros of both signs, windows of -inf; strides, padding, dilation, uneven
// kernels, gaps between windows, 256-tap windows, one-pixel planes. The same items run on the GPU
// in test_cuda_half_pooling; this checks their index arithmetic and tie/NaN rules without one.
#include "ops/cuda/max_pool_channels_last.cuh"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "layout_test_support.h"
#include "max_pool_test_support.h"
#include "ops/pooling.h"

namespace sublet::ops::cuda {
namespace {

using namespace sublet::ops::testing;

// The host storage type of a device type: same bits.
template <typename T>
using HostOf = std::conditional_t<std::is_same_v<T, __nv_bfloat16>, BFloat16,
                                  std::conditional_t<std::is_same_v<T, __half>, Float16, float>>;

template <typename To, typename From>
std::vector<To> same_bits(const std::vector<From>& from) {
  static_assert(sizeof(To) == sizeof(From));
  std::vector<To> to(from.size());
  std::memcpy(static_cast<void*>(to.data()), from.data(), from.size() * sizeof(From));
  return to;
}

Pool2dShape pool(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k, std::int64_t stride,
                 std::int64_t pad, std::int64_t dilation = 1) {
  Pool2dShape s;
  s.batch = n, s.channels = c, s.in_height = h, s.in_width = w;
  s.kernel_h = k, s.kernel_w = k, s.stride_h = stride, s.stride_w = stride, s.pad_h = pad, s.pad_w = pad;
  s.dilation_h = dilation, s.dilation_w = dilation;
  return s;
}

template <typename T>
void items_match_cpu(Pool2dShape s, std::uint64_t seed) {
  using H = HostOf<T>;
  constexpr int kLanes = kMaxPoolLanes<T>;
  const DType dtype = DTypeOf<H>::value;
  SCOPED_TRACE(storage_name<H>() + " [" + std::to_string(s.batch) + "," + std::to_string(s.channels) + "," +
               std::to_string(s.in_height) + "," + std::to_string(s.in_width) + "] kernel " +
               std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) + " stride " +
               std::to_string(s.stride_h) + "x" + std::to_string(s.stride_w) + " pad " + std::to_string(s.pad_h) +
               "x" + std::to_string(s.pad_w) + " dilation " + std::to_string(s.dilation_h) + "x" +
               std::to_string(s.dilation_w));
  ASSERT_EQ(s.channels % kLanes, 0);
  const std::int64_t n = s.batch, c = s.channels, h = s.in_height, w = s.in_width;
  const std::int64_t oh = s.out_height(), ow = s.out_width();
  const auto input = to_storage<H>(tied_input(s.input_numel(), seed));
  auto grad_values = rounded_to<H>(random_values<float>(s.output_numel(), seed + 1));
  for (std::size_t i = 0; i < grad_values.size(); i += 11) grad_values[i] = 0.25f;
  const auto grad_output = to_storage<H>(grad_values);

  s.format = MemoryFormat::Contiguous;
  const Context cpu = cpu_context();
  std::vector<H> out(s.output_numel()), grad_input(s.input_numel());
  std::vector<std::int64_t> indices(s.output_numel());
  max_pool2d_forward(cpu, s, dtype, input.data(), out.data(), indices.data());
  max_pool2d_backward(cpu, s, dtype, grad_output.data(), indices.data(), grad_input.data());

  s.format = MemoryFormat::ChannelsLast;
  const MaxPoolVectorGeometry g = max_pool_vector_geometry(s, kLanes);
  ASSERT_EQ(static_cast<std::int64_t>(g.output_work) * kLanes, s.output_numel());
  const auto x = same_bits<T>(nchw_to_nhwc(input, n, c, h, w));
  const auto gy = same_bits<T>(nchw_to_nhwc(grad_output, n, c, oh, ow));
  std::vector<T> y(s.output_numel()), gx(s.input_numel());
  std::vector<std::int64_t> codes64(s.output_numel());
  std::vector<std::uint8_t> codes8(s.output_numel());
  auto values = [&](const std::vector<T>& v, std::int64_t hh, std::int64_t ww) {
    return nhwc_to_nchw(same_bits<H>(v), n, c, hh, ww);
  };

  for (unsigned t = 0; t < g.output_work; ++t) max_pool_forward_item(g, x.data(), y.data(), codes64.data(), t);
  expect_bits_equal(values(y, oh, ow), out, "values (int64 indices)");
  expect_equal(nhwc_to_nchw(codes64, n, c, oh, ow), indices, "indices");
  for (unsigned t = 0; t < g.input_work; ++t) max_pool_backward_item(g, gy.data(), codes64.data(), gx.data(), t);
  expect_bits_equal(values(gx, h, w), grad_input, "grad_input (int64 indices)");

  std::fill(y.begin(), y.end(), T{});
  std::fill(gx.begin(), gx.end(), T{});
  for (unsigned t = 0; t < g.output_work; ++t) max_pool_forward_item(g, x.data(), y.data(), codes8.data(), t);
  expect_bits_equal(values(y, oh, ow), out, "values (window positions)");
  expect_equal(nhwc_to_nchw(codes8, n, c, oh, ow), positions_of(s, indices), "window positions");
  for (unsigned t = 0; t < g.input_work; ++t) max_pool_backward_item(g, gy.data(), codes8.data(), gx.data(), t);
  expect_bits_equal(values(gx, h, w), grad_input, "grad_input (window positions)");
}

template <typename T>
void all_shapes() {
  constexpr std::int64_t kLanes = kMaxPoolLanes<T>;
  Pool2dShape uneven = pool(2, 3 * kLanes, 13, 17, 3, 2, 1);
  uneven.kernel_w = 2, uneven.stride_w = 3;
  Pool2dShape gaps = pool(1, 2 * kLanes, 10, 14, 2, 3, 0);
  gaps.stride_w = 4, gaps.pad_w = 1;
  Pool2dShape dilated = pool(2, 2 * kLanes, 12, 10, 3, 1, 1, 2);
  dilated.dilation_w = 3;
  std::uint64_t seed = 500;
  for (const Pool2dShape& s :
       {pool(2, 64, 15, 13, 3, 2, 1), pool(3, kLanes, 9, 11, 2, 2, 0), dilated, uneven, gaps,
        pool(1, kLanes, 20, 19, 16, 2, 8), pool(1, kLanes, 1, 1, 1, 1, 0), pool(2, 256, 7, 7, 3, 1, 1),
        pool(1, 5 * kLanes, 6, 6, 3, 3, 1), pool(2, 64, 112, 112, 3, 2, 1)}) {
    items_match_cpu<T>(s, seed += 2);
  }
}

TEST(MaxPoolVectorizedHost, Float32ItemsMatchTheCpuBitForBit) { all_shapes<float>(); }
TEST(MaxPoolVectorizedHost, BFloat16ItemsMatchTheCpuBitForBit) { all_shapes<__nv_bfloat16>(); }
TEST(MaxPoolVectorizedHost, Float16ItemsMatchTheCpuBitForBit) { all_shapes<__half>(); }

}  // namespace
}  // namespace sublet::ops::cuda
