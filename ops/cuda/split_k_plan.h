#pragma once
// How the weight gradient of ops/cuda/conv2d_im2col.h splits the long sum over its rows (the
// GEMM's k = N*OH*OW) into slices, one partial product each, summed afterwards in a fixed order.
// Why: dW [K, Kp] is only a few output tiles (ResNet's stem: 64 x 152, three 64x64 tiles), so
// one GEMM runs on three SMs walking tens of thousands of rows each; cuBLAS does not split k
// itself. As one strided-batched GEMM of equal slices (+ one GEMM for the rows left
// over) every SM gets work.
//
// Host logic only, checked on the CPU (tests/ops/test_conv2d_im2col_shapes.cpp).
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace sublet::ops::cuda {

// Slices are multiples of this many rows: enough k-steps per CTA to fill its pipeline, and
// slice starts keep the operands' alignment.
inline constexpr std::int64_t kSplitKSliceUnit = 256;
// Slices wanted: with the stem's 3 output tiles, 384 CTAs for an H100's or H200's 132 SMs.
inline constexpr std::int64_t kSplitKTargetSlices = 128;
// The float32 partials together stay below this (unless one partial alone is larger).
inline constexpr std::size_t kSplitKPartialBytes = std::size_t{8} << 20;

struct SplitK {
  std::int64_t slices = 0;      // full slices: the batch of the strided-batched GEMM (may be 0)
  std::int64_t slice_rows = 0;  // rows of each, a multiple of kSplitKSliceUnit
  std::int64_t tail_rows = 0;   // rows after them (< slice_rows): one more GEMM, one more partial

  std::int64_t partials() const { return slices + (tail_rows > 0 ? 1 : 0); }
};

// rows >= 1; partial_bytes: the bytes of one float32 partial product (Kp * K * 4).
inline SplitK plan_split_k(std::int64_t rows, std::size_t partial_bytes) {
  const auto most = static_cast<std::int64_t>(kSplitKPartialBytes / std::max<std::size_t>(partial_bytes, 1));
  const std::int64_t wanted = std::clamp<std::int64_t>(most, 1, kSplitKTargetSlices);
  // ceil(rows / slice_rows) <= wanted: the partials (slices and tail) number at most `wanted`.
  const std::int64_t least_rows = (rows + wanted - 1) / wanted;
  SplitK plan;
  plan.slice_rows = std::max<std::int64_t>(1, (least_rows + kSplitKSliceUnit - 1) / kSplitKSliceUnit) * kSplitKSliceUnit;
  plan.slices = rows / plan.slice_rows;
  plan.tail_rows = rows - plan.slices * plan.slice_rows;
  return plan;
}

}  // namespace sublet::ops::cuda
