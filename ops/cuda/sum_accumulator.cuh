#pragma once
// What the GPU sums accumulate in and how a sum becomes an output element: float32 for the
// 16-bit types (as PyTorch's CUDA sums), double for float32 and float64 (as the CPU kernels),
// int64 for int64; the scale (1/n for a mean) is applied to the accumulator, then rounded once.
#include <cstdint>
#include <type_traits>

#include "ops/cuda/half_types.cuh"

namespace sublet::ops::cuda {

template <typename T>
using Accumulator = std::conditional_t<kIsHalf<T>, float,
                                       std::conditional_t<std::is_floating_point_v<T>, double, std::int64_t>>;

template <typename T>
__device__ inline T finish_sum(Accumulator<T> acc, double scale) {
  if constexpr (kIsHalf<T>) {
    return store_compute<T>(scale == 1.0 ? acc : acc * static_cast<float>(scale));
  } else {
    return scale == 1.0 ? static_cast<T>(acc) : static_cast<T>(static_cast<double>(acc) * scale);
  }
}

}  // namespace sublet::ops::cuda
