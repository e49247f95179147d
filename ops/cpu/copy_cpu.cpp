#include "ops/cpu/copy_cpu.h"

#include <algorithm>

#include "ops/cpu/dtype_dispatch.h"  // the source dtype of a casting copy
#include "ops/cpu/strided_loop.h"

namespace sublet::ops::cpu {

namespace {

// dst[..., r, c] = src[..., r, c] where dst is contiguous along c and src along r (a transpose
// made contiguous): going tile by tile keeps both sides' cache lines in use.
template <typename D, typename S>
void copy_transposed_tiles(const LoopShape<2>& loop, D* dst, const S* src) {
  constexpr std::int64_t kTile = 32;
  const std::size_t nd = loop.sizes.size();
  const std::int64_t rows = loop.sizes[nd - 2], cols = loop.sizes[nd - 1];
  const std::int64_t dst_row = loop.strides[nd - 2][0], src_col = loop.strides[nd - 1][1];
  Shape outer_sizes(loop.sizes.begin(), loop.sizes.end() - 2), dst_outer, src_outer;
  for (std::size_t d = 0; d + 2 < nd; ++d) {
    dst_outer.push_back(loop.strides[d][0]);
    src_outer.push_back(loop.strides[d][1]);
  }
  const std::int64_t outer = shape_numel(outer_sizes);
  const std::int64_t row_tiles = (rows + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (loop.numel > kParallelGrain)
  for (std::int64_t job = 0; job < outer * row_tiles; ++job) {
    const std::int64_t o = job / row_tiles, r0 = (job % row_tiles) * kTile;
    D* d = dst + strided_offset(o, outer_sizes, dst_outer);
    const S* s = src + strided_offset(o, outer_sizes, src_outer);
    const std::int64_t r1 = std::min(rows, r0 + kTile);
    for (std::int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const std::int64_t c1 = std::min(cols, c0 + kTile);
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) d[r * dst_row + c] = static_cast<D>(s[r + c * src_col]);
    }
  }
}

}  // namespace

template <typename D>
void copy(const Context&, const Shape& sizes, DType, StridedRef dst, DType src_dtype, ConstStridedRef src) {
  auto loop = make_loop_shape<2>(sizes, {&dst.strides, &src.strides});
  const std::size_t nd = loop.sizes.size();
  const bool transposed = nd >= 2 && loop.strides[nd - 1][0] == 1 && loop.strides[nd - 2][1] == 1 &&
                          loop.strides[nd - 1][1] > 1 && loop.sizes[nd - 1] >= 8 && loop.sizes[nd - 2] >= 8;
  if (transposed) {
    dispatch_copy_source(src_dtype, [&](auto src_tag) {
      using S = decltype(src_tag);
      copy_transposed_tiles<D, S>(loop, static_cast<D*>(dst.data), static_cast<const S*>(src.data));
    });
    return;
  }
  dispatch_copy_source(src_dtype, [&](auto src_tag) {
    using S = decltype(src_tag);
    D* d = static_cast<D*>(dst.data);
    const S* s = static_cast<const S*>(src.data);
    parallel_for_each_run(loop, [&](const auto& off, std::int64_t n, const auto& st) {
      D* dp = d + off[0];
      const S* sp = s + off[1];
      if (st[0] == 1 && st[1] == 1) {
        for (std::int64_t i = 0; i < n; ++i) dp[i] = static_cast<D>(sp[i]);
      } else {
        for (std::int64_t i = 0; i < n; ++i) dp[i * st[0]] = static_cast<D>(sp[i * st[1]]);
      }
    });
  });
}

template <typename T>
void fill(const Context&, DType, const Shape& sizes, StridedRef dst, double value) {
  auto loop = make_loop_shape<1>(sizes, {&dst.strides});
  const T v = static_cast<T>(value);
  T* d = static_cast<T*>(dst.data);
  parallel_for_each_run(loop, [&](const auto& off, std::int64_t n, const auto& st) {
    for (std::int64_t i = 0; i < n; ++i) d[off[0] + i * st[0]] = v;
  });
}

#define SUBLET_INSTANTIATE_COPY(T)                                                                         \
  template void copy<T>(const Context&, const Shape&, DType, StridedRef, DType, ConstStridedRef);          \
  template void fill<T>(const Context&, DType, const Shape&, StridedRef, double);
SUBLET_INSTANTIATE_COPY(float)
SUBLET_INSTANTIATE_COPY(double)
SUBLET_INSTANTIATE_COPY(std::int64_t)
SUBLET_INSTANTIATE_COPY(BFloat16)
SUBLET_INSTANTIATE_COPY(Float16)
SUBLET_INSTANTIATE_COPY(std::uint8_t)
#undef SUBLET_INSTANTIATE_COPY

}  // namespace sublet::ops::cpu
