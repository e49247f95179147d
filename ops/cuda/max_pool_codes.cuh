#pragma once
// What max pooling's forward saves for its backward, per output element: a Code. Either the
// maximum's int64 index h * W + w in its plane (PyTorch's layout, ops/pooling.h) or its uint8
// position kh * kernel_w + kw inside the window (the internal one-byte form of
// max_pool2d_forward_positions). Both name the same input element, so the backward adds an
// output's gradient to an input element exactly when the saved code equals the code that element
// has in that output's window.
#include <cuda_runtime_api.h>  // __host__ __device__ (empty outside nvcc)

#include <cstdint>
#include <type_traits>

namespace sublet::ops::cuda {

template <typename Code>
inline constexpr bool kIsWindowPosition = std::is_same_v<Code, std::uint8_t>;

// The code of the tap (kh, kw) of a window, which reads input (ih, iw).
template <typename Code, typename Index>
__host__ __device__ inline Index tap_code(Index kh, Index kw, Index ih, Index iw, Index kernel_w, Index in_w) {
  if constexpr (kIsWindowPosition<Code>) {
    return kh * kernel_w + kw;
  } else {
    return ih * in_w + iw;
  }
}

// The code input (ih, iw) has in output (oh, ow)'s window, or -1 when no tap of that window reads
// it (dilation steps over it). (ih, iw) must lie inside the window's extent, as the covering
// outputs of the backward do. Geometry: any struct with the Pool2dShape-named int fields.
// Host and device: tests/ops/test_max_pool_vectorized_host.cpp runs it on the CPU.
template <typename Code, typename Geometry, typename Index>
__host__ __device__ inline std::int64_t code_in_window(const Geometry& g, Index ih, Index iw, Index oh, Index ow) {
  if constexpr (kIsWindowPosition<Code>) {
    const Index dh = ih + g.pad_h - oh * g.stride_h, dw = iw + g.pad_w - ow * g.stride_w;
    if (g.dilation_h == 1 && g.dilation_w == 1) return static_cast<std::int64_t>(dh * g.kernel_w + dw);
    if (dh % g.dilation_h != 0 || dw % g.dilation_w != 0) return -1;
    return static_cast<std::int64_t>((dh / g.dilation_h) * g.kernel_w + dw / g.dilation_w);
  } else {
    return static_cast<std::int64_t>(ih) * g.in_w + iw;
  }
}

}  // namespace sublet::ops::cuda
