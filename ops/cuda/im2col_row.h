#pragma once
// One row of the column matrix of ops/cuda/conv2d_im2col.h, written by the lanes of one warp:
// lane j writes columns j, j + 32, j + 64, ... of the row, so each store of the warp is 32
// consecutive values (coalesced) and the values a lane reads for one kernel row r are KW * C
// contiguous input values when dilation_w is 1.
//
// Why this shape: one thread per value would take four divisions (row -> image, pixel -> oh, ow,
// column -> tap, c, tap -> r, s) per 4-byte value, far below the memory bandwidth. Here the
// row is split once per lane and the column's digits (r, s, c) are advanced by the lane count
// with carries, no division in the loop. Any kernel size, stride, padding and dilation.
//
// Plain C++ outside nvcc (as ops/cuda/int_divider.h), so that the CPU suite checks it against
// a direct im2col (tests/ops/test_conv2d_im2col_shapes.cpp).
#include <cstdint>

#include "ops/conv2d.h"
#include "ops/cuda/int_divider.h"

namespace sublet::ops::cuda {

inline constexpr unsigned kIm2colLanes = 32;                // one warp per column row
inline constexpr std::int64_t kIm2colColumnAlignment = 8;   // Kp: 16-byte rows for 16-bit dtypes

// A column k = (r * KW + s) * C + c as its digits; r >= KH for the zero columns past KH*KW*C.
struct Im2colColumn {
  std::uint32_t r, s, c;
};

struct Im2colGeometry {
  IntDivider plane;         // OH * OW
  IntDivider out_width;     // OW
  IntDivider channels;      // C
  IntDivider kernel_width;  // KW
  std::uint32_t padded_columns;  // Kp: KH*KW*C rounded up to kIm2colColumnAlignment
  std::uint32_t kernel_h;
  Im2colColumn lane_step;   // the digits of kIm2colLanes: what a lane adds to its column each step
  int height, width, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;

  SUBLET_HOST_DEVICE Im2colColumn column(std::uint32_t k) const {
    Im2colColumn d;
    std::uint32_t tap;
    channels.divmod(k, tap, d.c);
    kernel_width.divmod(tap, d.r, d.s);
    return d;
  }

  // d = the digits of (its column + kIm2colLanes). c + step.c < 2C and s + step.s + 1 < 2KW,
  // so one carry each is enough.
  SUBLET_HOST_DEVICE void advance(Im2colColumn& d) const {
    d.c += lane_step.c;
    std::uint32_t carry = 0;
    if (d.c >= channels.divisor()) {
      d.c -= channels.divisor();
      carry = 1;
    }
    d.s += lane_step.s + carry;
    if (d.s >= kernel_width.divisor()) {
      d.s -= kernel_width.divisor();
      ++d.r;
    }
    d.r += lane_step.r;
  }
};

// Kp: KH*KW*C rounded up to kIm2colColumnAlignment.
inline std::int64_t im2col_padded_columns(const Conv2dShape& s) {
  const std::int64_t columns = s.kernel_h * s.kernel_w * s.in_channels;
  return (columns + kIm2colColumnAlignment - 1) / kIm2colColumnAlignment * kIm2colColumnAlignment;
}

// Host side: the geometry of a shape conv2d_im2col_applies accepts (32-bit sizes).
inline Im2colGeometry im2col_geometry(const Conv2dShape& s) {
  Im2colGeometry g;
  g.plane = IntDivider(s.out_height() * s.out_width());
  g.out_width = IntDivider(s.out_width());
  g.channels = IntDivider(s.in_channels);
  g.kernel_width = IntDivider(s.kernel_w);
  g.padded_columns = static_cast<std::uint32_t>(im2col_padded_columns(s));
  g.kernel_h = static_cast<std::uint32_t>(s.kernel_h);
  g.lane_step = g.column(kIm2colLanes);
  g.height = static_cast<int>(s.in_height), g.width = static_cast<int>(s.in_width);
  g.stride_h = static_cast<int>(s.stride_h), g.stride_w = static_cast<int>(s.stride_w);
  g.pad_h = static_cast<int>(s.pad_h), g.pad_w = static_cast<int>(s.pad_w);
  g.dilation_h = static_cast<int>(s.dilation_h), g.dilation_w = static_cast<int>(s.dilation_w);
  return g;
}

// Lane `lane` (< kIm2colLanes) of the column row `row` (= (n * OH + oh) * OW + ow): writes
// out[k] for k = lane, lane + 32, ... below Kp, X[n, ih, iw, c] or `zero` outside the input and
// in the padding columns. input is channels-last [N, H, W, C] with fewer than 2^31 values.
template <typename T>
SUBLET_HOST_DEVICE inline void im2col_row(const Im2colGeometry& g, const T* __restrict__ input, std::uint32_t row,
                                          std::uint32_t lane, T zero, T* __restrict__ out) {
  std::uint32_t image, pixel, oh, ow;
  g.plane.divmod(row, image, pixel);
  g.out_width.divmod(pixel, oh, ow);
  const int top = static_cast<int>(oh) * g.stride_h - g.pad_h;
  const int left = static_cast<int>(ow) * g.stride_w - g.pad_w;
  const std::uint32_t height = static_cast<std::uint32_t>(g.height), width = static_cast<std::uint32_t>(g.width);
  const std::uint32_t channels = g.channels.divisor();
  const T* image_input = input + image * height * width * channels;
  Im2colColumn d = g.column(lane);
  // Columns lane + step * 32. A step count rather than `k < Kp` and a load on every step (of the
  // image's first value where the column is outside the input), so that the unrolled steps have
  // no branches and their loads are in flight together instead of one L2 round trip per step.
  const std::uint32_t steps = lane < g.padded_columns ? (g.padded_columns - lane + kIm2colLanes - 1) / kIm2colLanes : 0;
#if defined(__CUDA_ARCH__)
#pragma unroll 4
#endif
  for (std::uint32_t step = 0; step < steps; ++step, g.advance(d)) {
    // Negative ih/iw become large unsigned values: one compare per bound.
    const std::uint32_t ih = static_cast<std::uint32_t>(top + static_cast<int>(d.r) * g.dilation_h);
    const std::uint32_t iw = static_cast<std::uint32_t>(left + static_cast<int>(d.s) * g.dilation_w);
    const bool inside = d.r < g.kernel_h && ih < height && iw < width;
    const T loaded = image_input[inside ? (ih * width + iw) * channels + d.c : 0];
    out[lane + step * kIm2colLanes] = inside ? loaded : zero;
  }
}

}  // namespace sublet::ops::cuda
