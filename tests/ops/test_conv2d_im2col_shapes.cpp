// Which convolutions ops/cuda/conv2d_im2col.h serves as im2col + GEMM: channels-last, groups 1,
// float32, fewer than 8 input channels, at least 16 values per column row and
// more than one output pixel. Also its host/device index logic, run on the CPU: the im2col
// kernel's per-lane row (ops/cuda/im2col_row.h) against a direct im2col, and the weight
// gradient's split-K plan (ops/cuda/split_k_plan.h). The kernels themselves are in
// test_cuda_conv2d_im2col.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/cuda/conv2d_im2col.h"
#include "ops/cuda/im2col_row.h"
#include "ops/cuda/split_k_plan.h"

namespace sublet::ops {
namespace {

Conv2dShape shape(std::int64_t channels, std::int64_t size, std::int64_t k, std::int64_t stride, std::int64_t pad,
                  MemoryFormat format = MemoryFormat::ChannelsLast, std::int64_t groups = 1) {
  Conv2dShape s;
  s.batch = 4, s.in_channels = channels, s.in_height = s.in_width = size, s.out_channels = 64;
  s.kernel_h = s.kernel_w = k, s.stride_h = s.stride_w = stride, s.pad_h = s.pad_w = pad;
  s.groups = groups, s.format = format;
  return s;
}

TEST(Conv2dIm2col, NarrowChannelsLastInputs) {
  EXPECT_TRUE(cuda::conv2d_im2col_applies(shape(3, 32, 7, 2, 3), DType::Float32));    // ResNet stem at 32x32
  EXPECT_TRUE(cuda::conv2d_im2col_applies(shape(3, 224, 7, 2, 3), DType::Float32));   // at 224x224
  EXPECT_TRUE(cuda::conv2d_im2col_applies(shape(7, 16, 3, 1, 1), DType::Float32));     // 63 values per row
  EXPECT_TRUE(cuda::conv2d_im2col_applies(shape(2, 8, 3, 1, 1), DType::Float32));      // 18 values per row
}

TEST(Conv2dIm2col, EverythingElseStaysWithCuDnn) {
  // 16-bit stems: cuDNN's tensor-core kernels were as fast (ops/cuda/conv2d_im2col.h).
  EXPECT_FALSE(cuda::conv2d_im2col_applies(shape(3, 224, 7, 2, 3), DType::BFloat16));
  EXPECT_FALSE(cuda::conv2d_im2col_applies(shape(3, 224, 7, 2, 3), DType::Float16));
  EXPECT_FALSE(cuda::conv2d_im2col_applies(shape(8, 32, 3, 1, 1), DType::Float32));   // cuDNN's tensor cores take 8
  EXPECT_FALSE(cuda::conv2d_im2col_applies(shape(1, 28, 3, 1, 1), DType::Float32));   // 9 values per row
  EXPECT_FALSE(cuda::conv2d_im2col_applies(shape(3, 32, 7, 2, 3, MemoryFormat::Contiguous), DType::Float32));
  EXPECT_FALSE(cuda::conv2d_im2col_applies(shape(4, 32, 3, 1, 1, MemoryFormat::ChannelsLast, 2), DType::Float32));
  EXPECT_FALSE(cuda::conv2d_im2col_applies(shape(3, 32, 7, 2, 3), DType::Float64));    // no GEMM type for it
  EXPECT_FALSE(cuda::conv2d_im2col_applies(shape(3, 3, 3, 1, 0), DType::Float32));     // one output pixel
  Conv2dShape wide = shape(3, 32, 7, 2, 3);
  wide.out_channels = std::int64_t{1} << 24;  // K * Kp = 2^24 * 152: beyond the 32-bit indices
  EXPECT_FALSE(cuda::conv2d_im2col_applies(wide, DType::Float32));
}

// Column row m of a channels-last input, written directly: X[n, ih, iw, c] or 0, then zeros to Kp.
std::vector<float> direct_im2col(const Conv2dShape& s, const std::vector<float>& input) {
  const std::int64_t oh_count = s.out_height(), ow_count = s.out_width();
  const std::int64_t columns = s.kernel_h * s.kernel_w * s.in_channels, padded = cuda::im2col_padded_columns(s);
  std::vector<float> out(static_cast<std::size_t>(s.batch * oh_count * ow_count * padded), 0.0f);
  for (std::int64_t n = 0; n < s.batch; ++n)
    for (std::int64_t oh = 0; oh < oh_count; ++oh)
      for (std::int64_t ow = 0; ow < ow_count; ++ow)
        for (std::int64_t k = 0; k < columns; ++k) {
          const std::int64_t r = k / (s.kernel_w * s.in_channels), col = k / s.in_channels % s.kernel_w;
          const std::int64_t c = k % s.in_channels;
          const std::int64_t ih = oh * s.stride_h - s.pad_h + r * s.dilation_h;
          const std::int64_t iw = ow * s.stride_w - s.pad_w + col * s.dilation_w;
          if (ih < 0 || ih >= s.in_height || iw < 0 || iw >= s.in_width) continue;
          const std::int64_t row = (n * oh_count + oh) * ow_count + ow;
          out[static_cast<std::size_t>(row * padded + k)] =
              input[static_cast<std::size_t>(((n * s.in_height + ih) * s.in_width + iw) * s.in_channels + c)];
        }
  return out;
}

std::string describe(const Conv2dShape& s) {
  return "C=" + std::to_string(s.in_channels) + " " + std::to_string(s.in_height) + "x" + std::to_string(s.in_width) +
         " k" + std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) + " s" + std::to_string(s.stride_h) +
         "," + std::to_string(s.stride_w) + " p" + std::to_string(s.pad_h) + "," + std::to_string(s.pad_w) + " d" +
         std::to_string(s.dilation_h) + "," + std::to_string(s.dilation_w);
}

// Every lane of every row through im2col_row, as the kernel's warps run it; every value must be
// written (the buffer starts as NaN) and equal the direct im2col's.
void expect_rows_match(const Conv2dShape& s) {
  const cuda::Im2colGeometry g = cuda::im2col_geometry(s);
  std::vector<float> input(static_cast<std::size_t>(s.input_numel()));
  for (std::size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i + 1);  // no zeros
  const std::vector<float> expected = direct_im2col(s, input);
  std::vector<float> out(expected.size(), std::numeric_limits<float>::quiet_NaN());
  const std::uint32_t rows = static_cast<std::uint32_t>(s.batch * s.out_height() * s.out_width());
  for (std::uint32_t row = 0; row < rows; ++row) {
    for (std::uint32_t lane = 0; lane < cuda::kIm2colLanes; ++lane) {
      cuda::im2col_row(g, input.data(), row, lane, 0.0f, out.data() + static_cast<std::size_t>(row) * g.padded_columns);
    }
  }
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!(out[i] == expected[i]) && wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0u) << describe(s) << ": first at row " << first / g.padded_columns << " column "
                       << first % g.padded_columns << ": " << out[first] << " instead of " << expected[first];
}

TEST(Conv2dIm2col, LaneRowsMatchADirectIm2col) {
  struct Pair {
    std::int64_t h, w;
  };
  const Pair kernels[] = {{1, 3}, {3, 3}, {7, 7}, {2, 5}, {5, 1}};
  const Pair strides[] = {{1, 1}, {2, 2}, {2, 3}};
  const Pair pads[] = {{0, 0}, {1, 1}, {3, 2}};
  const Pair dilations[] = {{1, 1}, {1, 2}, {2, 1}, {3, 2}};
  int checked = 0;
  for (std::int64_t channels = 1; channels <= 7; ++channels)
    for (const Pair& k : kernels)
      for (const Pair& stride : strides)
        for (const Pair& pad : pads)
          for (const Pair& dilation : dilations) {
            Conv2dShape s = shape(channels, 9, k.h, 1, 0);
            s.batch = 2, s.in_width = 11, s.kernel_w = k.w;
            s.stride_h = stride.h, s.stride_w = stride.w, s.pad_h = pad.h, s.pad_w = pad.w;
            s.dilation_h = dilation.h, s.dilation_w = dilation.w;
            if (s.out_height() < 1 || s.out_width() < 1) continue;
            expect_rows_match(s);
            ++checked;
          }
  EXPECT_GT(checked, 1000);
}

TEST(Conv2dIm2col, LaneStepsKeepTheColumnDigits) {
  // An 11x11 kernel of 7 channels: 847 columns, 27 steps of 32 per lane with carries in c and s.
  for (std::int64_t channels : {1, 3, 7}) {
    Conv2dShape s = shape(channels, 40, 11, 1, 0);
    s.kernel_w = 9;
    const cuda::Im2colGeometry g = cuda::im2col_geometry(s);
    for (std::uint32_t lane = 0; lane < cuda::kIm2colLanes; ++lane) {
      cuda::Im2colColumn d = g.column(lane);
      for (std::uint32_t k = lane; k < g.padded_columns + 64; k += cuda::kIm2colLanes, g.advance(d)) {
        const std::uint32_t c = k % channels, col = k / channels % 9, r = k / (channels * 9);
        ASSERT_TRUE(d.r == r && d.s == col && d.c == c) << "C=" << channels << " column " << k << ": (" << d.r << ", "
                                                         << d.s << ", " << d.c << ")";
      }
    }
  }
}

TEST(Conv2dIm2col, SplitKOfTheResNetStem) {
  // ResNet-18 32x32 batch 128 float32: 32768 rows, dW^T [152, 64] partials of 38912 bytes.
  const cuda::SplitK stem = cuda::plan_split_k(32768, 152 * 64 * 4);
  EXPECT_EQ(stem.slices, 128);
  EXPECT_EQ(stem.slice_rows, 256);
  EXPECT_EQ(stem.tail_rows, 0);
  EXPECT_EQ(stem.partials(), 128);
  // 1800 rows: 7 slices and 8 rows left over for the tail GEMM.
  const cuda::SplitK odd = cuda::plan_split_k(1800, 152 * 8 * 4);
  EXPECT_EQ(odd.slices, 7);
  EXPECT_EQ(odd.slice_rows, 256);
  EXPECT_EQ(odd.tail_rows, 8);
  EXPECT_EQ(odd.partials(), 8);
  // Fewer rows than a slice: the tail alone.
  const cuda::SplitK small = cuda::plan_split_k(90, 152 * 5 * 4);
  EXPECT_EQ(small.slices, 0);
  EXPECT_EQ(small.tail_rows, 90);
  EXPECT_EQ(small.partials(), 1);
  // One partial larger than the partials' budget: one GEMM over all rows.
  const cuda::SplitK huge = cuda::plan_split_k(100000, cuda::kSplitKPartialBytes * 2);
  EXPECT_EQ(huge.partials(), 1);
}

TEST(Conv2dIm2col, SplitKCoversEveryRowWithinItsBudget) {
  for (std::int64_t rows : {1, 7, 255, 256, 257, 511, 4096, 32767, 32768, 32769, 100000, 802816, 110376}) {
    for (std::size_t partial_bytes : {std::size_t{24 * 8 * 4}, std::size_t{152 * 64 * 4}, std::size_t{152 * 256 * 4},
                                      std::size_t{848 * 512 * 4}, cuda::kSplitKPartialBytes + 4}) {
      const cuda::SplitK p = cuda::plan_split_k(rows, partial_bytes);
      const std::string what = std::to_string(rows) + " rows, partials of " + std::to_string(partial_bytes) + " B";
      EXPECT_EQ(p.slices * p.slice_rows + p.tail_rows, rows) << what;
      EXPECT_TRUE(p.tail_rows >= 0 && p.tail_rows < p.slice_rows) << what;
      EXPECT_EQ(p.slice_rows % cuda::kSplitKSliceUnit, 0) << what;
      EXPECT_LE(p.partials(), cuda::kSplitKTargetSlices) << what;
      EXPECT_GE(p.partials(), 1) << what;
      if (p.partials() > 1) {
        EXPECT_LE(static_cast<std::size_t>(p.partials()) * partial_bytes, cuda::kSplitKPartialBytes) << what;
      }
      // Not split finer than needed: one slice unit fewer per slice would exceed the target.
      if (p.slice_rows > cuda::kSplitKSliceUnit) {
        const std::int64_t finer = p.slice_rows - cuda::kSplitKSliceUnit;
        const std::int64_t most = std::min<std::int64_t>(
            cuda::kSplitKTargetSlices,
            std::max<std::int64_t>(1, static_cast<std::int64_t>(cuda::kSplitKPartialBytes / partial_bytes)));
        EXPECT_GT((rows + finer - 1) / finer, most) << what;
      }
    }
  }
}

}  // namespace
}  // namespace sublet::ops
