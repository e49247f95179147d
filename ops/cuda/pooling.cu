// Own pooling kernels (cuDNN's max pooling gives no int64 indices in PyTorch's layout).
// Forward: one thread per output, the CPU loop verbatim. Backward: one thread per *input*
// element gathering from the outputs whose windows cover it, in increasing output order — the
// order in which the CPU kernel scatters — so there are no atomics and the result equals the
// CPU's bit for bit.
// 16-bit inputs (bfloat16, float16) load into float32, accumulate and compare there, and store
// 16 bits once (ops/cuda/half_types.cuh); float32/float64 run the same code as before.
// Channels-last (NHWC) buffers run the same per-element loops with the window's neighbours C
// elements apart instead of 1 (the flat index enumerates elements in memory order, so
// consecutive threads touch consecutive channels: coalesced); a max-pooling index stays
// h * W + w within the (n, c) plane, as for NCHW and PyTorch.
// Max pooling has two index widths. When every index fits in 32 bits (the usual case: the
// ResNet stem's 64x64x112x112 input is 2^25.6 elements) the kernels split linear indices with
// precomputed multiply-shift dividers (int_divider.h): the 64-bit version spent ~12 64-bit
// divisions per element of the backward, which makes it bound by integer division rather than
// memory. Larger tensors keep the 64-bit kernels.
// What a max-pooling forward saves per output is a Code (max_pool_codes.cuh): the int64 index
// of ops/pooling.h's max_pool2d_forward or the one-byte window position of
// max_pool2d_forward_positions; every max-pooling kernel serves both. Channels-last calls whose
// channels fill 16-byte vectors run max_pool_channels_last.cu's kernels instead.
#include <cmath>
#include <string>
#include <type_traits>

#include "core/errors.h"
#include "ops/cuda/cuda_checks.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/device_math.cuh"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/int_divider.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/max_pool_channels_last.h"
#include "ops/cuda/max_pool_codes.cuh"
#include "ops/cuda/pooling_cuda.h"

namespace sublet::ops::cuda {
namespace {

// Plain-value copy of Pool2dShape for the device (its member functions are host-only).
struct PoolGeometry {
  std::int64_t planes, in_h, in_w, out_h, out_w;
  std::int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  std::int64_t channels;
};

PoolGeometry geometry_of(const Pool2dShape& s) {
  return {s.batch * s.channels, s.in_height, s.in_width, s.out_height(), s.out_width(), s.kernel_h, s.kernel_w,
          s.stride_h,           s.stride_w,  s.pad_h,     s.pad_w,        s.dilation_h, s.dilation_w, s.channels};
}

// Where flat element i of a [N, C, H, W] activation (in memory order of the layout) sits:
// outer is its plane n * C + c (NCHW) or its sample n (NHWC, where c is the channel).
struct Site {
  std::int64_t outer, c, h, w;
};

template <bool kLast>
__device__ Site site_of(std::int64_t i, std::int64_t channels, std::int64_t height, std::int64_t width) {
  if constexpr (kLast) {
    const std::int64_t c = i % channels, q = i / channels;
    return {q / (width * height), c, (q / width) % height, q % width};
  } else {
    return {i / (width * height), 0, (i / width) % height, i % width};
  }
}

// Offset of (h, w) = (0, 0) of a site's plane in a [.., height, width] activation; the plane's
// element (h, w) is at base + (h * width + w) * plane_step<kLast>(channels).
template <bool kLast>
__device__ std::int64_t plane_base(const Site& s, std::int64_t channels, std::int64_t height, std::int64_t width) {
  return kLast ? s.outer * height * width * channels + s.c : s.outer * height * width;
}

template <bool kLast>
__device__ std::int64_t plane_step(std::int64_t channels) {
  return kLast ? channels : 1;
}

__host__ __device__ std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Outputs along one axis whose window [o*stride - pad, o*stride - pad + extent) may contain i.
__device__ void covering_outputs(std::int64_t i, std::int64_t stride, std::int64_t pad, std::int64_t extent,
                                 std::int64_t out_size, std::int64_t& first, std::int64_t& last) {
  first = floor_div(i + pad - extent, stride) + 1;  // smallest o with o*stride - pad + extent > i
  last = floor_div(i + pad, stride);                // largest o with o*stride - pad <= i
  if (first < 0) first = 0;
  if (last > out_size - 1) last = out_size - 1;
}

// The largest value in output (oh, ow)'s window of one plane and its code (max_pool_codes.cuh),
// in the CPU kernel's order (first maximum wins; a NaN wins and ends the scan). Index is the type
// the window arithmetic runs in: std::int64_t for PoolGeometry, int for PoolGeometry32.
// `step`: the distance between horizontal neighbours of the plane (1 for NCHW, C for NHWC).
template <typename Index, typename Geometry, typename T, typename Code>
__device__ void window_max(const Geometry& g, const T* in, Index oh, Index ow, T& max_out, Code& code_out,
                           std::int64_t step = 1) {
  using A = ComputeType<T>;
  A best = -INFINITY;
  Index best_index = -1;
  Index best_code = -1;
  for (Index kh = 0; kh < g.kernel_h; ++kh) {
    const Index ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
    if (ih < 0 || ih >= g.in_h) continue;
    for (Index kw = 0; kw < g.kernel_w; ++kw) {
      const Index iw = ow * g.stride_w - g.pad_w + kw * g.dilation_w;
      if (iw < 0 || iw >= g.in_w) continue;
      const A v = load_compute(in[step == 1 ? ih * g.in_w + iw : (ih * g.in_w + iw) * step]);
      if (best_index < 0 || v > best || device_isnan(v)) {
        best = v;
        best_index = ih * g.in_w + iw;
        best_code = tap_code<Code, Index>(kh, kw, ih, iw, g.kernel_w, g.in_w);
        if (device_isnan(v)) break;
      }
    }
    if (device_isnan(best)) break;
  }
  max_out = store_compute<T>(best);
  code_out = static_cast<Code>(best_code);
}

template <typename T, bool kLast, typename Code>
__global__ void max_pool_forward(PoolGeometry g, const T* input, T* output, Code* codes) {
  const std::int64_t total = g.planes * g.out_h * g.out_w;
  for (std::int64_t o = global_thread_index(); o < total; o += grid_threads()) {
    const Site at = site_of<kLast>(o, g.channels, g.out_h, g.out_w);
    const T* in = input + plane_base<kLast>(at, g.channels, g.in_h, g.in_w);
    window_max<std::int64_t>(g, in, at.h, at.w, output[o], codes[o], plane_step<kLast>(g.channels));
  }
}

template <typename T, bool kLast, typename Code>
__global__ void max_pool_backward(PoolGeometry g, const T* grad_output, const Code* codes, T* grad_input) {
  using A = ComputeType<T>;
  const std::int64_t total = g.planes * g.in_h * g.in_w;
  const std::int64_t extent_h = g.dilation_h * (g.kernel_h - 1) + 1, extent_w = g.dilation_w * (g.kernel_w - 1) + 1;
  const std::int64_t step = plane_step<kLast>(g.channels);
  for (std::int64_t e = global_thread_index(); e < total; e += grid_threads()) {
    const Site at = site_of<kLast>(e, g.channels, g.in_h, g.in_w);
    const std::int64_t ih = at.h, iw = at.w;
    std::int64_t oh0, oh1, ow0, ow1;
    covering_outputs(ih, g.stride_h, g.pad_h, extent_h, g.out_h, oh0, oh1);
    covering_outputs(iw, g.stride_w, g.pad_w, extent_w, g.out_w, ow0, ow1);
    const std::int64_t plane = plane_base<kLast>(at, g.channels, g.out_h, g.out_w);
    A sum = A(0);
    for (std::int64_t oh = oh0; oh <= oh1; ++oh) {
      for (std::int64_t ow = ow0; ow <= ow1; ++ow) {
        const std::int64_t o = plane + (oh * g.out_w + ow) * step;
        if (static_cast<std::int64_t>(codes[o]) == code_in_window<Code>(g, ih, iw, oh, ow)) {
          sum += load_compute(grad_output[o]);
        }
      }
    }
    grad_input[e] = store_compute<T>(sum);
  }
}

// ---- max pooling with 32-bit indices ----------------------------------------------------------

// Every element index of the op (input and output, all planes) is below 2^31.
struct PoolGeometry32 {
  int out_h, out_w, in_h, in_w;
  int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  unsigned input_numel, output_numel;
  IntDivider by_in_w, by_in_h, by_out_w, by_out_h, by_stride_h, by_stride_w;
  unsigned channels;
  IntDivider by_channels;  // channels-last: the channel is the fastest index
};

bool fits_int32(const Pool2dShape& s) {
  return s.input_numel() < kIntDividerLimit && s.output_numel() < kIntDividerLimit;
}

PoolGeometry32 geometry32_of(const Pool2dShape& s) {
  PoolGeometry32 g;
  g.out_h = static_cast<int>(s.out_height()), g.out_w = static_cast<int>(s.out_width());
  g.in_h = static_cast<int>(s.in_height), g.in_w = static_cast<int>(s.in_width);
  g.kernel_h = static_cast<int>(s.kernel_h), g.kernel_w = static_cast<int>(s.kernel_w);
  g.stride_h = static_cast<int>(s.stride_h), g.stride_w = static_cast<int>(s.stride_w);
  g.pad_h = static_cast<int>(s.pad_h), g.pad_w = static_cast<int>(s.pad_w);
  g.dilation_h = static_cast<int>(s.dilation_h), g.dilation_w = static_cast<int>(s.dilation_w);
  g.input_numel = static_cast<unsigned>(s.input_numel());
  g.output_numel = static_cast<unsigned>(s.output_numel());
  g.by_in_w = IntDivider(s.in_width), g.by_in_h = IntDivider(s.in_height);
  g.by_out_w = IntDivider(s.out_width()), g.by_out_h = IntDivider(s.out_height());
  g.by_stride_h = IntDivider(s.stride_h), g.by_stride_w = IntDivider(s.stride_w);
  g.channels = static_cast<unsigned>(s.channels), g.by_channels = IntDivider(s.channels);
  return g;
}

// Grid-stride loop over [0, n) in 32 bits: n < 2^31 and the grid has at most 2^28 threads, so
// i + stride never wraps.
__device__ inline unsigned first_index32() { return blockIdx.x * blockDim.x + threadIdx.x; }
__device__ inline unsigned grid_threads32() { return gridDim.x * blockDim.x; }

// covering_outputs without negative operands, so that the unsigned divider applies:
// first = 0 when i + pad < extent (where floor((i + pad - extent) / stride) + 1 <= 0).
__device__ void covering_outputs32(unsigned i, int pad, int extent, const IntDivider& stride, int out_size,
                                   int& first, int& last) {
  const unsigned shifted = i + static_cast<unsigned>(pad);
  first = shifted < static_cast<unsigned>(extent) ? 0 : static_cast<int>(stride.div(shifted - extent)) + 1;
  last = min(static_cast<int>(stride.div(shifted)), out_size - 1);
}

// Channels-last: flat index = pixel * C + c, pixel = (n * H + h) * W + w, so the "plane" p
// below is the sample n. NCHW: pixel = the flat index, c = 0, and p is the plane n * C + c.
template <bool kLast>
__device__ inline void split_channel32(const PoolGeometry32& g, unsigned i, unsigned& pixel, unsigned& c) {
  if constexpr (kLast) {
    g.by_channels.divmod(i, pixel, c);
  } else {
    pixel = i;
    c = 0;
  }
}

template <typename T, bool kLast, typename Code>
__global__ void max_pool_forward32(const __grid_constant__ PoolGeometry32 g, const T* input, T* output,
                                   Code* codes) {
  const unsigned plane_size = static_cast<unsigned>(g.in_h * g.in_w);
  for (unsigned o = first_index32(); o < g.output_numel; o += grid_threads32()) {
    unsigned pixel, c, row, ow, p, oh;
    split_channel32<kLast>(g, o, pixel, c);
    g.by_out_w.divmod(pixel, row, ow);
    g.by_out_h.divmod(row, p, oh);
    const T* in = kLast ? input + p * plane_size * g.channels + c : input + p * plane_size;
    window_max<int>(g, in, static_cast<int>(oh), static_cast<int>(ow), output[o], codes[o],
                    kLast ? static_cast<std::int64_t>(g.channels) : std::int64_t{1});
  }
}

template <typename T, bool kLast, typename Code>
__global__ void max_pool_backward32(const __grid_constant__ PoolGeometry32 g, const T* grad_output,
                                    const Code* codes, T* grad_input) {
  const int extent_h = g.dilation_h * (g.kernel_h - 1) + 1, extent_w = g.dilation_w * (g.kernel_w - 1) + 1;
  const unsigned plane_outputs = static_cast<unsigned>(g.out_h * g.out_w);
  const unsigned step = kLast ? g.channels : 1u;  // between horizontal neighbours of a plane
  for (unsigned e = first_index32(); e < g.input_numel; e += grid_threads32()) {
    unsigned pixel, c, row, iw, p, ih;
    split_channel32<kLast>(g, e, pixel, c);
    g.by_in_w.divmod(pixel, row, iw);
    g.by_in_h.divmod(row, p, ih);
    int oh0, oh1, ow0, ow1;
    covering_outputs32(ih, g.pad_h, extent_h, g.by_stride_h, g.out_h, oh0, oh1);
    covering_outputs32(iw, g.pad_w, extent_w, g.by_stride_w, g.out_w, ow0, ow1);
    const unsigned plane = kLast ? p * plane_outputs * g.channels + c : p * plane_outputs;
    ComputeType<T> sum = 0;
    for (int oh = oh0; oh <= oh1; ++oh) {
      for (int ow = ow0; ow <= ow1; ++ow) {
        const unsigned o = plane + static_cast<unsigned>(oh * g.out_w + ow) * step;
        if (static_cast<std::int64_t>(codes[o]) ==
            code_in_window<Code>(g, static_cast<int>(ih), static_cast<int>(iw), oh, ow)) {
          sum += load_compute(grad_output[o]);
        }
      }
    }
    grad_input[e] = store_compute<T>(sum);
  }
}

// The CPU's avg_window: the window clipped to the padded input gives the divisor with padding,
// then clipped to the input gives the summed rectangle.
struct AvgWindow {
  std::int64_t h0, h1, w0, w1;
  double divisor;
};

__device__ AvgWindow avg_window(const PoolGeometry& g, std::int64_t oh, std::int64_t ow, bool count_include_pad) {
  std::int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
  std::int64_t h1 = min(h0 + g.kernel_h, g.in_h + g.pad_h);
  std::int64_t w1 = min(w0 + g.kernel_w, g.in_w + g.pad_w);
  const std::int64_t padded_size = (h1 - h0) * (w1 - w0);
  h0 = max(h0, std::int64_t{0});
  w0 = max(w0, std::int64_t{0});
  h1 = min(h1, g.in_h);
  w1 = min(w1, g.in_w);
  const std::int64_t inside_size = (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, static_cast<double>(count_include_pad ? padded_size : inside_size)};
}

template <typename T, bool kLast>
__global__ void avg_pool_forward(PoolGeometry g, const T* input, T* output, bool count_include_pad) {
  using A = ComputeType<T>;
  const std::int64_t total = g.planes * g.out_h * g.out_w;
  const std::int64_t step = plane_step<kLast>(g.channels);
  for (std::int64_t o = global_thread_index(); o < total; o += grid_threads()) {
    const Site at = site_of<kLast>(o, g.channels, g.out_h, g.out_w);
    const T* in = input + plane_base<kLast>(at, g.channels, g.in_h, g.in_w);
    const AvgWindow w = avg_window(g, at.h, at.w, count_include_pad);
    A sum = A(0);
    for (std::int64_t ih = w.h0; ih < w.h1; ++ih) {
      for (std::int64_t iw = w.w0; iw < w.w1; ++iw) sum += load_compute(in[(ih * g.in_w + iw) * step]);
    }
    output[o] = store_compute<T>(static_cast<A>(sum / w.divisor));
  }
}

template <typename T, bool kLast>
__global__ void avg_pool_backward(PoolGeometry g, const T* grad_output, T* grad_input, bool count_include_pad) {
  using A = ComputeType<T>;
  const std::int64_t total = g.planes * g.in_h * g.in_w;
  const std::int64_t step = plane_step<kLast>(g.channels);
  for (std::int64_t e = global_thread_index(); e < total; e += grid_threads()) {
    const Site at = site_of<kLast>(e, g.channels, g.in_h, g.in_w);
    const std::int64_t ih = at.h, iw = at.w;
    std::int64_t oh0, oh1, ow0, ow1;
    covering_outputs(ih, g.stride_h, g.pad_h, g.kernel_h, g.out_h, oh0, oh1);
    covering_outputs(iw, g.stride_w, g.pad_w, g.kernel_w, g.out_w, ow0, ow1);
    const std::int64_t plane = plane_base<kLast>(at, g.channels, g.out_h, g.out_w);
    A sum = A(0);
    for (std::int64_t oh = oh0; oh <= oh1; ++oh) {
      for (std::int64_t ow = ow0; ow <= ow1; ++ow) {
        const AvgWindow w = avg_window(g, oh, ow, count_include_pad);
        if (ih < w.h0 || ih >= w.h1 || iw < w.w0 || iw >= w.w1) continue;
        sum += static_cast<A>(load_compute(grad_output[plane + (oh * g.out_w + ow) * step]) / w.divisor);
      }
    }
    grad_input[e] = store_compute<T>(sum);
  }
}

struct AdaptiveGeometry {
  std::int64_t planes, in_h, in_w, out_h, out_w, channels;
};

__host__ __device__ std::int64_t adaptive_start(std::int64_t index, std::int64_t in_size, std::int64_t out_size) {
  return (index * in_size) / out_size;
}
__host__ __device__ std::int64_t adaptive_end(std::int64_t index, std::int64_t in_size, std::int64_t out_size) {
  return ((index + 1) * in_size + out_size - 1) / out_size;
}

template <typename T, bool kLast>
__global__ void adaptive_forward(AdaptiveGeometry g, const T* input, T* output) {
  using A = ComputeType<T>;
  const std::int64_t total = g.planes * g.out_h * g.out_w;
  const std::int64_t step = plane_step<kLast>(g.channels);
  for (std::int64_t o = global_thread_index(); o < total; o += grid_threads()) {
    const Site at = site_of<kLast>(o, g.channels, g.out_h, g.out_w);
    const std::int64_t oh = at.h, ow = at.w;
    const T* in = input + plane_base<kLast>(at, g.channels, g.in_h, g.in_w);
    const std::int64_t h0 = adaptive_start(oh, g.in_h, g.out_h), h1 = adaptive_end(oh, g.in_h, g.out_h);
    const std::int64_t w0 = adaptive_start(ow, g.in_w, g.out_w), w1 = adaptive_end(ow, g.in_w, g.out_w);
    A sum = A(0);
    for (std::int64_t ih = h0; ih < h1; ++ih) {
      for (std::int64_t iw = w0; iw < w1; ++iw) sum += load_compute(in[(ih * g.in_w + iw) * step]);
    }
    output[o] = store_compute<T>(sum / static_cast<A>((h1 - h0) * (w1 - w0)));
  }
}

template <typename T, bool kLast>
__global__ void adaptive_backward(AdaptiveGeometry g, const T* grad_output, T* grad_input) {
  using A = ComputeType<T>;
  const std::int64_t total = g.planes * g.in_h * g.in_w;
  const std::int64_t step = plane_step<kLast>(g.channels);
  for (std::int64_t e = global_thread_index(); e < total; e += grid_threads()) {
    const Site at = site_of<kLast>(e, g.channels, g.in_h, g.in_w);
    const std::int64_t ih = at.h, iw = at.w;
    // Outputs whose range [start, end) holds ih: from floor(ih*OH/H) to ceil((ih+1)*OH/H) - 1.
    const std::int64_t oh0 = (ih * g.out_h) / g.in_h;
    const std::int64_t oh1 = min(((ih + 1) * g.out_h + g.in_h - 1) / g.in_h - 1, g.out_h - 1);
    const std::int64_t ow0 = (iw * g.out_w) / g.in_w;
    const std::int64_t ow1 = min(((iw + 1) * g.out_w + g.in_w - 1) / g.in_w - 1, g.out_w - 1);
    const std::int64_t plane = plane_base<kLast>(at, g.channels, g.out_h, g.out_w);
    A sum = A(0);
    for (std::int64_t oh = oh0; oh <= oh1; ++oh) {
      const std::int64_t h0 = adaptive_start(oh, g.in_h, g.out_h), h1 = adaptive_end(oh, g.in_h, g.out_h);
      if (ih < h0 || ih >= h1) continue;
      for (std::int64_t ow = ow0; ow <= ow1; ++ow) {
        const std::int64_t w0 = adaptive_start(ow, g.in_w, g.out_w), w1 = adaptive_end(ow, g.in_w, g.out_w);
        if (iw < w0 || iw >= w1) continue;
        sum += load_compute(grad_output[plane + (oh * g.out_w + ow) * step]) / static_cast<A>((h1 - h0) * (w1 - w0));
      }
    }
    grad_input[e] = store_compute<T>(sum);
  }
}

// Adaptive pooling to 1x1 (a ResNet head's global average), whose gradient is each plane's one
// value spread over its H*W inputs: the general kernel above would spend its time on 64-bit index
// divisions. Same value as there (one output covers every input).
// `spatial`: H*W; channels-last elements are ((n*H*W + p)*C + c), NCHW ((n*C + c)*H*W + p).
template <typename T, bool kLast>
__global__ void global_average_backward(std::uint32_t total, IntDivider spatial, IntDivider channels,
                                        const T* grad_output, T* grad_input) {
  using A = ComputeType<T>;
  const A count = static_cast<A>(spatial.divisor());
  for (std::int64_t e = global_thread_index(); e < total; e += grid_threads()) {
    const auto i = static_cast<std::uint32_t>(e);
    std::uint32_t plane;
    if constexpr (kLast) {
      std::uint32_t pixel, c;
      channels.divmod(i, pixel, c);  // pixel = n*H*W + p
      plane = spatial.div(pixel) * channels.divisor() + c;
    } else {
      plane = spatial.div(i);
    }
    grad_input[e] = store_compute<T>(A(0) + load_compute(grad_output[plane]) / count);  // A(0) +: -0 as there
  }
}

// f(T{}, std::bool_constant<channels-last>{}): float32/float64/bfloat16/float16 NCHW, and
// float32/bfloat16/float16 channels-last (float64 has no channels-last entry: the runtime
// converts it to NCHW).
template <typename F>
void dispatch(const char* op, DType dtype, MemoryFormat format, F&& f) {
  const bool last = format == MemoryFormat::ChannelsLast;
  if (last && dtype == DType::Float64) {
    throw DTypeError(std::string(op) + ": channels-last takes float32, bfloat16 or float16, got float64");
  }
  dispatch_device_floating(dtype, op, [&](auto tag) {
    if (last) {
      f(tag, std::true_type{});
    } else {
      f(tag, std::false_type{});
    }
  });
}

}  // namespace

namespace {

// The kernels for one kind of code: the vectorised channels-last ones where they fit (Auto
// only), else the 32-bit scalar ones where every index fits (not Wide), else the 64-bit ones.
template <typename Code>
void max_pool_forward_codes(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* input,
                            void* output, Code* codes, PoolIndexing indexing) {
  if (indexing == PoolIndexing::Auto && max_pool_vectorized_fits(shape, dtype, input, output, codes, sizeof(Code))) {
    max_pool_forward_vectorized(ctx, shape, dtype, input, output, codes);
    return;
  }
  const bool narrow = indexing != PoolIndexing::Wide && fits_int32(shape);
  memory::CudaDeviceGuard device(ctx.device);
  dispatch("max_pool2d", dtype, shape.format, [&](auto tag, auto last) {
    using T = decltype(tag);
    if (narrow) {
      max_pool_forward32<T, decltype(last)::value, Code>
          <<<grid_for(shape.output_numel()), kBlockThreads, 0, stream_of(ctx.stream)>>>(
              geometry32_of(shape), static_cast<const T*>(input), static_cast<T*>(output), codes);
      SUBLET_CUDA_LAUNCH_CHECK(max_pool_forward32);
      return;
    }
    max_pool_forward<T, decltype(last)::value, Code>
        <<<grid_for(shape.output_numel()), kBlockThreads, 0, stream_of(ctx.stream)>>>(
            geometry_of(shape), static_cast<const T*>(input), static_cast<T*>(output), codes);
    SUBLET_CUDA_LAUNCH_CHECK(max_pool_forward);
  });
}

template <typename Code>
void max_pool_backward_codes(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* grad_output,
                             const Code* codes, void* grad_input, PoolIndexing indexing) {
  if (indexing == PoolIndexing::Auto &&
      max_pool_vectorized_fits(shape, dtype, grad_output, grad_input, codes, sizeof(Code))) {
    max_pool_backward_vectorized(ctx, shape, dtype, grad_output, codes, grad_input);
    return;
  }
  const bool narrow = indexing != PoolIndexing::Wide && fits_int32(shape);
  memory::CudaDeviceGuard device(ctx.device);
  dispatch("max_pool2d", dtype, shape.format, [&](auto tag, auto last) {
    using T = decltype(tag);
    if (narrow) {
      max_pool_backward32<T, decltype(last)::value, Code>
          <<<grid_for(shape.input_numel()), kBlockThreads, 0, stream_of(ctx.stream)>>>(
              geometry32_of(shape), static_cast<const T*>(grad_output), codes, static_cast<T*>(grad_input));
      SUBLET_CUDA_LAUNCH_CHECK(max_pool_backward32);
      return;
    }
    max_pool_backward<T, decltype(last)::value, Code>
        <<<grid_for(shape.input_numel()), kBlockThreads, 0, stream_of(ctx.stream)>>>(
            geometry_of(shape), static_cast<const T*>(grad_output), codes, static_cast<T*>(grad_input));
    SUBLET_CUDA_LAUNCH_CHECK(max_pool_backward);
  });
}

}  // namespace

void max_pool2d_forward(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* input, void* output,
                        std::int64_t* indices, PoolIndexing indexing) {
  max_pool_forward_codes(ctx, shape, dtype, input, output, indices, indexing);
}

void max_pool2d_backward(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* grad_output,
                         const std::int64_t* indices, void* grad_input, PoolIndexing indexing) {
  max_pool_backward_codes(ctx, shape, dtype, grad_output, indices, grad_input, indexing);
}

void max_pool2d_forward_positions(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* input,
                                  void* output, std::uint8_t* positions, PoolIndexing indexing) {
  max_pool_forward_codes(ctx, shape, dtype, input, output, positions, indexing);
}

void max_pool2d_backward_positions(const Context& ctx, const Pool2dShape& shape, DType dtype,
                                   const void* grad_output, const std::uint8_t* positions, void* grad_input,
                                   PoolIndexing indexing) {
  max_pool_backward_codes(ctx, shape, dtype, grad_output, positions, grad_input, indexing);
}

void avg_pool2d_forward(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* input, void* output,
                        bool count_include_pad) {
  const PoolGeometry g = geometry_of(shape);
  memory::CudaDeviceGuard device(ctx.device);
  dispatch("avg_pool2d", dtype, shape.format, [&](auto tag, auto last) {
    using T = decltype(tag);
    avg_pool_forward<T, decltype(last)::value><<<grid_for(shape.output_numel()), kBlockThreads, 0,
                                                 stream_of(ctx.stream)>>>(
        g, static_cast<const T*>(input), static_cast<T*>(output), count_include_pad);
    SUBLET_CUDA_LAUNCH_CHECK(avg_pool_forward);
  });
}

void avg_pool2d_backward(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* grad_output,
                         void* grad_input, bool count_include_pad) {
  const PoolGeometry g = geometry_of(shape);
  memory::CudaDeviceGuard device(ctx.device);
  dispatch("avg_pool2d", dtype, shape.format, [&](auto tag, auto last) {
    using T = decltype(tag);
    avg_pool_backward<T, decltype(last)::value><<<grid_for(shape.input_numel()), kBlockThreads, 0,
                                                  stream_of(ctx.stream)>>>(
        g, static_cast<const T*>(grad_output), static_cast<T*>(grad_input), count_include_pad);
    SUBLET_CUDA_LAUNCH_CHECK(avg_pool_backward);
  });
}

void adaptive_avg_pool2d_forward(const Context& ctx, const AdaptivePool2dShape& shape, DType dtype,
                                 const void* input, void* output) {
  const AdaptiveGeometry g{shape.batch * shape.channels, shape.in_height, shape.in_width, shape.out_height,
                           shape.out_width, shape.channels};
  memory::CudaDeviceGuard device(ctx.device);
  dispatch("adaptive_avg_pool2d", dtype, shape.format, [&](auto tag, auto last) {
    using T = decltype(tag);
    adaptive_forward<T, decltype(last)::value><<<grid_for(shape.output_numel()), kBlockThreads, 0,
                                                 stream_of(ctx.stream)>>>(g, static_cast<const T*>(input),
                                                                          static_cast<T*>(output));
    SUBLET_CUDA_LAUNCH_CHECK(adaptive_forward);
  });
}

void adaptive_avg_pool2d_backward(const Context& ctx, const AdaptivePool2dShape& shape, DType dtype,
                                  const void* grad_output, void* grad_input) {
  const AdaptiveGeometry g{shape.batch * shape.channels, shape.in_height, shape.in_width, shape.out_height,
                           shape.out_width, shape.channels};
  memory::CudaDeviceGuard device(ctx.device);
  dispatch("adaptive_avg_pool2d", dtype, shape.format, [&](auto tag, auto last) {
    using T = decltype(tag);
    if (shape.out_height == 1 && shape.out_width == 1 && shape.input_numel() > 0 &&
        shape.input_numel() < kIntDividerLimit) {
      global_average_backward<T, decltype(last)::value><<<grid_for(shape.input_numel()), kBlockThreads, 0,
                                                          stream_of(ctx.stream)>>>(
          static_cast<std::uint32_t>(shape.input_numel()), IntDivider(shape.in_height * shape.in_width),
          IntDivider(shape.channels), static_cast<const T*>(grad_output), static_cast<T*>(grad_input));
      SUBLET_CUDA_LAUNCH_CHECK(global_average_backward);
      return;
    }
    adaptive_backward<T, decltype(last)::value><<<grid_for(shape.input_numel()), kBlockThreads, 0,
                                                  stream_of(ctx.stream)>>>(g, static_cast<const T*>(grad_output),
                                                                           static_cast<T*>(grad_input));
    SUBLET_CUDA_LAUNCH_CHECK(adaptive_backward);
  });
}

}  // namespace sublet::ops::cuda
