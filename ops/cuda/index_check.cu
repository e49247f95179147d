#include "ops/cuda/index_check.h"

#include <limits>

#include "ops/cuda/cuda_checks.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/strided_indexer.cuh"

namespace sublet::ops::cuda {
namespace {

constexpr unsigned long long kNone = std::numeric_limits<unsigned long long>::max();

__global__ void first_out_of_range_kernel(StridedIndexer<1> ix, std::int64_t numel, const std::int64_t* values,
                                          std::int64_t limit, bool has_allowed, std::int64_t allowed,
                                          unsigned long long* first) {
  for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) {
    const std::int64_t v = values[ix.offset(i)];
    if ((v < 0 || v >= limit) && !(has_allowed && v == allowed)) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

}  // namespace

std::optional<OutOfRange> find_out_of_range(const Context& ctx, const std::int64_t* values, const Shape& sizes,
                                            const Shape& strides, std::int64_t limit,
                                            std::optional<std::int64_t> allowed) {
  const std::int64_t numel = shape_numel(sizes);
  if (numel == 0) return std::nullopt;
  const auto ix = make_indexer<1>(sizes, {&strides});
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  // While a CUDA graph is being captured nothing runs, so there is nothing to read back, and the
  // synchronisation would invalidate the capture. The eager warm-up steps before a capture have
  // checked the same kind of data; a graph replays without checks, as PyTorch's graphs do.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  SUBLET_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return std::nullopt;
  auto flag = ctx.workspace(sizeof(unsigned long long));
  auto* first = static_cast<unsigned long long*>(flag.get());
  SUBLET_CUDA_CHECK(cudaMemsetAsync(first, 0xFF, sizeof(unsigned long long), stream));  // = kNone
  first_out_of_range_kernel<<<grid_for(numel), kBlockThreads, 0, stream>>>(ix, numel, values, limit, allowed.has_value(),
                                                                            allowed.value_or(0), first);
  SUBLET_CUDA_LAUNCH_CHECK(first_out_of_range_kernel);
  unsigned long long position = kNone;
  SUBLET_CUDA_CHECK(cudaMemcpyAsync(&position, first, sizeof(position), cudaMemcpyDeviceToHost, stream));
  SUBLET_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (position == kNone) return std::nullopt;
  OutOfRange bad;
  bad.position = static_cast<std::int64_t>(position);
  SUBLET_CUDA_CHECK(cudaMemcpyAsync(&bad.value, values + ix.offset(bad.position), sizeof(std::int64_t),
                                    cudaMemcpyDeviceToHost, stream));
  SUBLET_CUDA_CHECK(cudaStreamSynchronize(stream));
  return bad;
}

}  // namespace sublet::ops::cuda
