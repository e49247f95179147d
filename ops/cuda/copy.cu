// Strided cast-copy and fill kernels, and the host/device byte copies. The casts are the CPU
// kernel's static_casts (convert_element, ops/cuda/half_types.cuh, for the 16-bit types), so
// copies agree exactly with the CPU for every dtype pair, bfloat16 and float16 included.
#include "core/half.h"
#include "memory/current_stream.h"
#include "ops/cuda/copy_cuda.h"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/cuda_checks.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/strided_indexer.cuh"

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

cudaStream_t stream_for(Device device, StreamHandle stream) {
  return stream_of(stream != nullptr ? stream : memory::current_stream(device));
}

}  // namespace

void copy(const Context& ctx, const Shape& sizes, DType dst_dtype, StridedRef dst, DType src_dtype,
          ConstStridedRef src) {
  const std::int64_t numel = shape_numel(sizes);
  if (numel == 0) return;
  const auto ix = make_indexer<2>(sizes, {&dst.strides, &src.strides});
  memory::CudaDeviceGuard device(ctx.device);
  dispatch_device_dtype(dst_dtype, [&](auto dst_tag) {
    dispatch_device_dtype(src_dtype, [&](auto src_tag) {
      using D = decltype(dst_tag);
      using S = decltype(src_tag);
      copy_kernel<D, S><<<grid_for(numel), kBlockThreads, 0, stream_of(ctx.stream)>>>(
          ix, numel, static_cast<D*>(dst.data), static_cast<const S*>(src.data));
      SUBLET_CUDA_LAUNCH_CHECK(copy_kernel);
    });
  });
}

void fill(const Context& ctx, DType dtype, const Shape& sizes, StridedRef dst, double value) {
  const std::int64_t numel = shape_numel(sizes);
  if (numel == 0) return;
  const auto ix = make_indexer<1>(sizes, {&dst.strides});
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  // The 16-bit fills write the bits the CPU fill writes: the host conversion of the value.
  if (dtype == DType::BFloat16 || dtype == DType::Float16) {
    const std::uint16_t bits = dtype == DType::BFloat16 ? BFloat16(value).bits : Float16(value).bits;
    auto* data = static_cast<std::uint16_t*>(dst.data);
    fill_kernel<std::uint16_t><<<grid_for(numel), kBlockThreads, 0, stream>>>(ix, numel, data, bits);
    SUBLET_CUDA_LAUNCH_CHECK(fill_kernel);
    return;
  }
  cpu::dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<grid_for(numel), kBlockThreads, 0, stream>>>(ix, numel, static_cast<T*>(dst.data),
                                                                  static_cast<T>(value));
    SUBLET_CUDA_LAUNCH_CHECK(fill_kernel);
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
