#pragma once
// Launch geometry shared by the element-wise style kernels: fixed-size blocks, a capped grid and
// grid-stride loops, so any element count (int64) is covered by one launch.
#include <algorithm>
#include <cstdint>

namespace sublet::ops::cuda {

inline constexpr int kBlockThreads = 256;
// 2^20 blocks of 256 threads cover 2^28 elements per sweep; beyond that the loops stride.
inline constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 20;

inline unsigned grid_for(std::int64_t work_items, int threads = kBlockThreads) {
  const std::int64_t blocks = (work_items + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, kMaxBlocks));
}

// First index and stride of a grid-stride loop, in int64 so that no product overflows.
__device__ inline std::int64_t global_thread_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_threads() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace sublet::ops::cuda
