#pragma once
// The per-thread work of the channels-last max-pooling kernels (max_pool_channels_last.cu):
// one work item is one pixel's 16 bytes of channels (8 bfloat16/float16 or 4 float32 lanes).
// Host and device functions, so that tests/ops/test_max_pool_vectorized_host.cpp runs every
// work item on the CPU, through the same conversions (half_types.cuh), against the CPU kernel.
//
// Forward: the window's taps in the scalar kernel's order, one 16-byte load each; per lane the
// first maximum (strict >) wins, or the first NaN, after which the lane is settled: what
// pooling.cu's window_max does with its early exit. Backward: the outputs whose windows cover the
// pixel, in increasing output order as the CPU scatters, adding a lane's gradient where the saved
// code names this pixel; a group's gradients are read only when one of its lanes matches.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ops/cuda/half_types.cuh"
#include "ops/cuda/int_divider.h"
#include "ops/cuda/max_pool_codes.cuh"
#include "ops/pooling.h"

// Lane loops unrolled on the device (their arrays stay in registers); plain loops on the host.
#if defined(__CUDA_ARCH__)
#define MAX_POOL_UNROLL _Pragma("unroll")
#else
#define MAX_POOL_UNROLL
#endif

namespace sublet::ops::cuda {

inline constexpr std::size_t kMaxPoolVectorBytes = 16;

template <typename T>
inline constexpr int kMaxPoolLanes = static_cast<int>(kMaxPoolVectorBytes / sizeof(T));

// One work item's lanes of type E, moved as one aligned vector (int64 codes: several).
template <typename E, int kCount>
struct alignas(sizeof(E) * kCount < kMaxPoolVectorBytes ? sizeof(E) * kCount : kMaxPoolVectorBytes) MaxPoolPack {
  E v[kCount];
};

// Every element index of the op is below 2^31 (max_pool_vectorized_fits checks it).
struct MaxPoolVectorGeometry {
  int out_h, out_w, in_h, in_w;
  int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  unsigned channels;
  unsigned output_work, input_work;  // pixels times channel groups
  IntDivider by_groups, by_out_w, by_out_h, by_in_w, by_in_h, by_stride_h, by_stride_w;
};

inline MaxPoolVectorGeometry max_pool_vector_geometry(const Pool2dShape& s, int lanes) {
  MaxPoolVectorGeometry g;
  g.out_h = static_cast<int>(s.out_height()), g.out_w = static_cast<int>(s.out_width());
  g.in_h = static_cast<int>(s.in_height), g.in_w = static_cast<int>(s.in_width);
  g.kernel_h = static_cast<int>(s.kernel_h), g.kernel_w = static_cast<int>(s.kernel_w);
  g.stride_h = static_cast<int>(s.stride_h), g.stride_w = static_cast<int>(s.stride_w);
  g.pad_h = static_cast<int>(s.pad_h), g.pad_w = static_cast<int>(s.pad_w);
  g.dilation_h = static_cast<int>(s.dilation_h), g.dilation_w = static_cast<int>(s.dilation_w);
  g.channels = static_cast<unsigned>(s.channels);
  g.output_work = static_cast<unsigned>(s.output_numel() / lanes);
  g.input_work = static_cast<unsigned>(s.input_numel() / lanes);
  g.by_groups = IntDivider(s.channels / lanes);
  g.by_out_w = IntDivider(s.out_width()), g.by_out_h = IntDivider(s.out_height());
  g.by_in_w = IntDivider(s.in_width), g.by_in_h = IntDivider(s.in_height);
  g.by_stride_h = IntDivider(s.stride_h), g.by_stride_w = IntDivider(s.stride_w);
  return g;
}

// Work item t of the forward: output pixel t / groups, channels (t % groups) * lanes onwards.
template <typename T, typename Code>
__host__ __device__ inline void max_pool_forward_item(const MaxPoolVectorGeometry& g, const T* input, T* output,
                                                      Code* codes, unsigned t) {
  constexpr int L = kMaxPoolLanes<T>;
  using A = ComputeType<T>;
  unsigned pixel, group, row, ow, n, oh;
  g.by_groups.divmod(t, pixel, group);
  g.by_out_w.divmod(pixel, row, ow);
  g.by_out_h.divmod(row, n, oh);
  const T* in = input + n * static_cast<unsigned>(g.in_h * g.in_w) * g.channels + group * L;
  A best[L];
  int best_code[L];
  MAX_POOL_UNROLL
  for (int j = 0; j < L; ++j) best[j] = -INFINITY, best_code[j] = -1;
  const int h0 = static_cast<int>(oh) * g.stride_h - g.pad_h, w0 = static_cast<int>(ow) * g.stride_w - g.pad_w;
  for (int kh = 0; kh < g.kernel_h; ++kh) {
    const int ih = h0 + kh * g.dilation_h;
    if (ih < 0 || ih >= g.in_h) continue;
    for (int kw = 0; kw < g.kernel_w; ++kw) {
      const int iw = w0 + kw * g.dilation_w;
      if (iw < 0 || iw >= g.in_w) continue;
      const MaxPoolPack<T, L> v =
          *reinterpret_cast<const MaxPoolPack<T, L>*>(in + static_cast<unsigned>(ih * g.in_w + iw) * g.channels);
      const int code = tap_code<Code, int>(kh, kw, ih, iw, g.kernel_w, g.in_w);
      MAX_POOL_UNROLL
      for (int j = 0; j < L; ++j) {
        const A x = load_compute(v.v[j]);
        // The first tap, then a greater value or a NaN, until a NaN has been taken.
        if (best_code[j] < 0 || (!(best[j] != best[j]) && (x > best[j] || x != x))) {
          best[j] = x;
          best_code[j] = code;
        }
      }
    }
  }
  MaxPoolPack<T, L> out;
  MaxPoolPack<Code, L> saved;
  MAX_POOL_UNROLL
  for (int j = 0; j < L; ++j) {
    out.v[j] = store_compute<T>(best[j]);
    saved.v[j] = static_cast<Code>(best_code[j]);
  }
  *reinterpret_cast<MaxPoolPack<T, L>*>(output + t * L) = out;
  *reinterpret_cast<MaxPoolPack<Code, L>*>(codes + t * L) = saved;
}

// Work item t of the backward: input pixel t / groups, channels (t % groups) * lanes onwards.
template <typename T, typename Code>
__host__ __device__ inline void max_pool_backward_item(const MaxPoolVectorGeometry& g, const T* grad_output,
                                                       const Code* codes, T* grad_input, unsigned t) {
  constexpr int L = kMaxPoolLanes<T>;
  using A = ComputeType<T>;
  const int extent_h = g.dilation_h * (g.kernel_h - 1) + 1, extent_w = g.dilation_w * (g.kernel_w - 1) + 1;
  unsigned pixel, group, row, iw, n, ih;
  g.by_groups.divmod(t, pixel, group);
  g.by_in_w.divmod(pixel, row, iw);
  g.by_in_h.divmod(row, n, ih);
  // The outputs whose window extent holds (ih, iw), as pooling.cu's covering_outputs32.
  const unsigned sh = ih + static_cast<unsigned>(g.pad_h), sw = iw + static_cast<unsigned>(g.pad_w);
  const int oh0 = sh < static_cast<unsigned>(extent_h) ? 0 : static_cast<int>(g.by_stride_h.div(sh - extent_h)) + 1;
  const int ow0 = sw < static_cast<unsigned>(extent_w) ? 0 : static_cast<int>(g.by_stride_w.div(sw - extent_w)) + 1;
  const int last_h = static_cast<int>(g.by_stride_h.div(sh)), last_w = static_cast<int>(g.by_stride_w.div(sw));
  const int oh1 = last_h < g.out_h - 1 ? last_h : g.out_h - 1;
  const int ow1 = last_w < g.out_w - 1 ? last_w : g.out_w - 1;
  const unsigned base = n * static_cast<unsigned>(g.out_h * g.out_w) * g.channels + group * L;
  A sum[L];
  MAX_POOL_UNROLL
  for (int j = 0; j < L; ++j) sum[j] = A(0);
  for (int oh = oh0; oh <= oh1; ++oh) {
    for (int ow = ow0; ow <= ow1; ++ow) {
      const std::int64_t here = code_in_window<Code>(g, static_cast<int>(ih), static_cast<int>(iw), oh, ow);
      if (here < 0) continue;
      const unsigned o = base + static_cast<unsigned>(oh * g.out_w + ow) * g.channels;
      const MaxPoolPack<Code, L> saved = *reinterpret_cast<const MaxPoolPack<Code, L>*>(codes + o);
      bool match[L];
      bool any = false;
      MAX_POOL_UNROLL
      for (int j = 0; j < L; ++j) {
        match[j] = static_cast<std::int64_t>(saved.v[j]) == here;
        any = any || match[j];
      }
      if (!any) continue;
      const MaxPoolPack<T, L> grad = *reinterpret_cast<const MaxPoolPack<T, L>*>(grad_output + o);
      MAX_POOL_UNROLL
      for (int j = 0; j < L; ++j) {
        if (match[j]) sum[j] += load_compute(grad.v[j]);
      }
    }
  }
  MaxPoolPack<T, L> out;
  MAX_POOL_UNROLL
  for (int j = 0; j < L; ++j) out.v[j] = store_compute<T>(sum[j]);
  *reinterpret_cast<MaxPoolPack<T, L>*>(grad_input + t * L) = out;
}

}  // namespace sublet::ops::cuda

#undef MAX_POOL_UNROLL
