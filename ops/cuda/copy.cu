// Cast-copy and fill kernels, and the host/device byte copies. The casts are the CPU kernel's
// static_casts (convert_element, ops/cuda/half_types.cuh, for the 16-bit types), so copies
// agree exactly with the CPU for every dtype pair, bfloat16 and float16 included.
// Layouts (ops/cuda/elementwise_plan.h): both operands dense in one layout and 16-byte aligned
// take the dense kernel (V elements per access, V = 16 bytes / the wider type, a scalar tail);
// [rows, cols] views with dense aligned rows (a slice of the last dimension) the row kernel;
// the rest the strided kernel. A fill of a dense layout with zero bits is a memset; other dense
// fills write 16-byte vectors.
#include <algorithm>
#include <array>
#include <cmath>

#include "core/half.h"
#include "memory/current_stream.h"
#include "ops/cuda/copy_cuda.h"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/cuda_checks.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/elementwise_plan.h"
#include "ops/cuda/int_divider.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/strided_indexer.cuh"
#include "ops/cuda/vector_pack.cuh"

namespace sublet::ops::cuda {
namespace {

template <typename D, typename S>
__global__ void copy_kernel(StridedIndexer<2> ix, std::int64_t numel, D* dst, const S* src) {
  for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) {
    std::int64_t off[2];
    ix.offsets(i, off);
    dst[off[0]] = convert_element<D>(src[off[1]]);
  }
}

template <typename T>
__global__ void fill_kernel(StridedIndexer<1> ix, std::int64_t numel, T* dst, T value) {
  for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) dst[ix.offset(i)] = value;
}

template <typename D, typename S>
inline constexpr int kCopyWidth = static_cast<int>(kVectorBytes / (sizeof(D) > sizeof(S) ? sizeof(D) : sizeof(S)));

// src dense in dst's layout (or one element, `scalar`), both 16-byte aligned. A pack of the
// narrower type is less than 16 bytes: Pack's alignment makes each access one vector anyway.
template <typename D, typename S, int V>
__global__ void __launch_bounds__(kBlockThreads)
    copy_dense_kernel(std::int64_t numel, D* dst, const S* src, bool scalar) {
  const std::int64_t packs = numel / V;
  for (std::int64_t p = global_thread_index(); p < packs; p += grid_threads()) {
    Pack<S, V> x;
    if (scalar) {
#pragma unroll
      for (int j = 0; j < V; ++j) x.v[j] = src[0];
    } else {
      x = *reinterpret_cast<const Pack<S, V>*>(src + p * V);
    }
    Pack<D, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = convert_element<D>(x.v[j]);
    *reinterpret_cast<Pack<D, V>*>(dst + p * V) = y;
  }
  const std::int64_t i = packs * V + global_thread_index();
  if (i < numel) dst[i] = convert_element<D>(src[scalar ? 0 : i]);
}

// [rows, cols] with V | cols: rows of dst and src (or one src element per row) as vectors.
template <typename D, typename S, int V>
__global__ void __launch_bounds__(kBlockThreads)
    copy_row_kernel(std::int64_t packs, IntDivider packs_per_row, D* dst, std::int64_t dst_row_stride, const S* src,
                    std::int64_t src_row_stride, bool src_per_row) {
  for (std::int64_t p = global_thread_index(); p < packs; p += grid_threads()) {
    std::uint32_t row, col_pack;
    packs_per_row.divmod(static_cast<std::uint32_t>(p), row, col_pack);
    const std::int64_t col = static_cast<std::int64_t>(col_pack) * V;
    const S* src_row = src + row * src_row_stride;
    Pack<S, V> x;
    if (src_per_row) {
#pragma unroll
      for (int j = 0; j < V; ++j) x.v[j] = src_row[0];
    } else {
      x = *reinterpret_cast<const Pack<S, V>*>(src_row + col);
    }
    Pack<D, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = convert_element<D>(x.v[j]);
    *reinterpret_cast<Pack<D, V>*>(dst + row * dst_row_stride + col) = y;
  }
}

template <typename T, int V>
__global__ void __launch_bounds__(kBlockThreads) fill_dense_kernel(std::int64_t numel, T* dst, T value) {
  Pack<T, V> y;
#pragma unroll
  for (int j = 0; j < V; ++j) y.v[j] = value;
  const std::int64_t packs = numel / V;
  for (std::int64_t p = global_thread_index(); p < packs; p += grid_threads()) store_pack<T, V>(dst, p * V, y);
  const std::int64_t i = packs * V + global_thread_index();
  if (i < numel) dst[i] = value;
}

unsigned vector_grid(std::int64_t numel, int width) { return grid_for(std::max<std::int64_t>(numel / width, 1)); }

// The dense or row kernel when the layouts allow one; false leaves the copy to the strided one.
template <typename D, typename S>
bool copy_fast(cudaStream_t stream, const Shape& sizes, std::int64_t numel, StridedRef dst, ConstStridedRef src) {
  constexpr int V = kCopyWidth<D, S>;
  constexpr std::size_t wider = kVectorBytes / V;
  const std::array<const void*, 2> data{dst.data, src.data};
  const auto dense = plan_dense<2>(sizes, {&dst.strides, &src.strides}, data, wider);
  if (dense.dense) {
    copy_dense_kernel<D, S, V><<<vector_grid(numel, V), kBlockThreads, 0, stream>>>(
        numel, static_cast<D*>(dst.data), static_cast<const S*>(src.data), dense.scalar[1]);
    SUBLET_CUDA_LAUNCH_CHECK(copy_dense_kernel);
    return true;
  }
  const auto rows = plan_rows<2>(sizes, {&dst.strides, &src.strides}, data, wider);
  if (!rows.applies) return false;
  const std::int64_t packs_per_row = rows.cols / V, packs = rows.rows * packs_per_row;
  copy_row_kernel<D, S, V><<<grid_for(packs), kBlockThreads, 0, stream>>>(
      packs, IntDivider(packs_per_row), static_cast<D*>(dst.data), rows.row_stride[0],
      static_cast<const S*>(src.data), rows.row_stride[1], rows.per_row[1]);
  SUBLET_CUDA_LAUNCH_CHECK(copy_row_kernel);
  return true;
}

template <typename T>
void fill_typed(cudaStream_t stream, const Shape& sizes, std::int64_t numel, StridedRef dst, T value) {
  constexpr int V = static_cast<int>(kVectorBytes / sizeof(T));
  const auto dense = plan_dense<1>(sizes, {&dst.strides}, {dst.data}, sizeof(T));
  if (dense.dense) {
    fill_dense_kernel<T, V><<<vector_grid(numel, V), kBlockThreads, 0, stream>>>(numel, static_cast<T*>(dst.data),
                                                                                  value);
    SUBLET_CUDA_LAUNCH_CHECK(fill_dense_kernel);
    return;
  }
  const auto ix = make_indexer<1>(sizes, {&dst.strides});
  fill_kernel<T><<<grid_for(numel), kBlockThreads, 0, stream>>>(ix, numel, static_cast<T*>(dst.data), value);
  SUBLET_CUDA_LAUNCH_CHECK(fill_kernel);
}

// True when the value's bits in `dtype` are all zero (+0): a memset writes them.
bool zero_bits(DType dtype, double value) {
  if (dtype == DType::BFloat16) return BFloat16(value).bits == 0;
  if (dtype == DType::Float16) return Float16(value).bits == 0;
  return value == 0.0 && !std::signbit(value);
}

cudaStream_t stream_for(Device device, StreamHandle stream) {
  return stream_of(stream != nullptr ? stream : memory::current_stream(device));
}

}  // namespace

void copy(const Context& ctx, const Shape& sizes, DType dst_dtype, StridedRef dst, DType src_dtype,
          ConstStridedRef src) {
  const std::int64_t numel = shape_numel(sizes);
  if (numel == 0) return;
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  dispatch_device_dtype(dst_dtype, [&](auto dst_tag) {
    dispatch_device_dtype(src_dtype, [&](auto src_tag) {
      using D = decltype(dst_tag);
      using S = decltype(src_tag);
      if (copy_fast<D, S>(stream, sizes, numel, dst, src)) return;
      const auto ix = make_indexer<2>(sizes, {&dst.strides, &src.strides});
      copy_kernel<D, S><<<grid_for(numel), kBlockThreads, 0, stream>>>(ix, numel, static_cast<D*>(dst.data),
                                                                       static_cast<const S*>(src.data));
      SUBLET_CUDA_LAUNCH_CHECK(copy_kernel);
    });
  });
}

void fill(const Context& ctx, DType dtype, const Shape& sizes, StridedRef dst, double value) {
  const std::int64_t numel = shape_numel(sizes);
  if (numel == 0) return;
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  const bool memset_zero = zero_bits(dtype, value) && detail::is_dense(sizes, dst.strides);
  const auto zero_fill = [&] {
    SUBLET_CUDA_CHECK(cudaMemsetAsync(dst.data, 0, static_cast<std::size_t>(numel) * element_size(dtype), stream));
  };
  // The 16-bit fills write the bits the CPU fill writes: the host conversion of the value.
  if (dtype == DType::BFloat16 || dtype == DType::Float16) {
    const std::uint16_t bits = dtype == DType::BFloat16 ? BFloat16(value).bits : Float16(value).bits;
    if (memset_zero) return zero_fill();
    fill_typed<std::uint16_t>(stream, sizes, numel, dst, bits);
    return;
  }
  cpu::dispatch_dtype(dtype, [&](auto tag) {  // DTypeError for a dtype without a fill kernel
    using T = decltype(tag);
    if (memset_zero) return zero_fill();
    fill_typed<T>(stream, sizes, numel, dst, static_cast<T>(value));
  });
}

void copy_bytes(Device dst_device, void* dst, Device src_device, const void* src, std::size_t bytes,
                StreamHandle stream) {
  if (bytes == 0) return;
  if (dst_device.is_cuda() && src_device.is_cuda() && dst_device.index != src_device.index) {
    // The source's producers run on its device's stream: wait for them, copy, wait for the copy
    // (the caller may free the source as soon as this returns).
    {
      memory::CudaDeviceGuard device(src_device);
      SUBLET_CUDA_CHECK(cudaStreamSynchronize(stream_for(src_device, nullptr)));
    }
    memory::CudaDeviceGuard device(dst_device);
    const cudaStream_t s = stream_for(dst_device, stream);
    SUBLET_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, bytes, s));
    SUBLET_CUDA_CHECK(cudaStreamSynchronize(s));
    return;
  }
  const Device gpu = dst_device.is_cuda() ? dst_device : src_device;
  memory::CudaDeviceGuard device(gpu);
  const cudaStream_t s = stream_for(gpu, stream);
  const cudaMemcpyKind kind = dst_device.is_cuda() && src_device.is_cuda() ? cudaMemcpyDeviceToDevice
                              : dst_device.is_cuda()                      ? cudaMemcpyHostToDevice
                                                                          : cudaMemcpyDeviceToHost;
  SUBLET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s));
  if (kind != cudaMemcpyDeviceToDevice) SUBLET_CUDA_CHECK(cudaStreamSynchronize(s));
}

}  // namespace sublet::ops::cuda
