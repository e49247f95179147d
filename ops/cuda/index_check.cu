#include "ops/cuda/index_check.h"

#include <limits>
#include <utility>

#include "memory/cuda_device_guard.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/stream.h"
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

// verdict = [first bad position or -1, its value], in the pinned host memory of
// ops::CapturedIndexChecks (which kernels address directly under unified addressing).
__global__ void publish_kernel(StridedIndexer<1> ix, const std::int64_t* values, const unsigned long long* first,
                               std::int64_t* verdict) {
  const unsigned long long position = *first;
  const bool none = position == kNone;
  verdict[0] = none ? -1 : static_cast<std::int64_t>(position);
  verdict[1] = none ? 0 : values[ix.offset(static_cast<std::int64_t>(position))];
}

// Searches `values` on `stream`: `first` becomes the first bad position, or kNone.
void enqueue_search(cudaStream_t stream, const StridedIndexer<1>& ix, std::int64_t numel, const std::int64_t* values,
                    std::int64_t limit, std::optional<std::int64_t> allowed, unsigned long long* first) {
  SUBLET_CUDA_CHECK(cudaMemsetAsync(first, 0xFF, sizeof(unsigned long long), stream));  // = kNone
  first_out_of_range_kernel<<<grid_for(numel), kBlockThreads, 0, stream>>>(ix, numel, values, limit, allowed.has_value(),
                                                                            allowed.value_or(0), first);
  SUBLET_CUDA_LAUNCH_CHECK(first_out_of_range_kernel);
}

}  // namespace

void check_in_range(const Context& ctx, const std::int64_t* values, const Shape& sizes, const Shape& strides,
                    std::int64_t limit, std::optional<std::int64_t> allowed, const OutOfRangeReport& report) {
  const std::int64_t numel = shape_numel(sizes);
  if (numel == 0) return;
  const auto ix = make_indexer<1>(sizes, {&strides});
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  SUBLET_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) {
    // Nothing runs now, and waiting would invalidate the capture: the check is captured if the
    // capture collects checks, else left out (the replays then run unchecked).
    CapturedIndexChecks* captured = captured_index_checks();
    if (captured == nullptr) return;
    // The scratch outlives this call (every replay uses it): from the capture's pool, on the
    // stream whose pool that is (a second stream's workspaces belong to the first).
    const StreamHandle owner = ctx.workspace_hold != nullptr ? ctx.workspace_hold->stream : ctx.stream;
    memory::ScopedBlock scratch(*ctx.allocator, sizeof(unsigned long long), owner, memory::BlockCategory::Workspace);
    auto* first = static_cast<unsigned long long*>(scratch.get());
    std::int64_t* verdict = captured->add(std::move(scratch), report);  // in pinned host memory
    enqueue_search(stream, ix, numel, values, limit, allowed, first);
    publish_kernel<<<1, 1, 0, stream>>>(ix, values, first, verdict);
    SUBLET_CUDA_LAUNCH_CHECK(index_check_publish_kernel);
    return;
  }
  // Eagerly: one copy back (and one more, of the value, only for a bad index).
  auto flag = ctx.workspace(sizeof(unsigned long long));
  auto* first = static_cast<unsigned long long*>(flag.get());
  enqueue_search(stream, ix, numel, values, limit, allowed, first);
  unsigned long long position = kNone;
  SUBLET_CUDA_CHECK(cudaMemcpyAsync(&position, first, sizeof(position), cudaMemcpyDeviceToHost, stream));
  SUBLET_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (position == kNone) return;
  OutOfRange bad;
  bad.position = static_cast<std::int64_t>(position);
  SUBLET_CUDA_CHECK(cudaMemcpyAsync(&bad.value, values + ix.offset(bad.position), sizeof(std::int64_t),
                                    cudaMemcpyDeviceToHost, stream));
  SUBLET_CUDA_CHECK(cudaStreamSynchronize(stream));
  report(bad);
}

}  // namespace sublet::ops::cuda
