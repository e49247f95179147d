#pragma once
// Overloads that pick the float or double device math function by argument type, so one
// kernel template serves both precisions with the same formula as the CPU kernel.
#include <cstdint>
#include <type_traits>

namespace sublet::ops::cuda {

__device__ inline float device_exp(float x) { return expf(x); }
__device__ inline double device_exp(double x) { return exp(x); }
__device__ inline float device_log(float x) { return logf(x); }
__device__ inline double device_log(double x) { return log(x); }
__device__ inline float device_sqrt(float x) { return sqrtf(x); }
__device__ inline double device_sqrt(double x) { return sqrt(x); }
__device__ inline float device_pow(float x, float e) { return powf(x, e); }
__device__ inline double device_pow(double x, double e) { return pow(x, e); }
__device__ inline float device_tanh(float x) { return tanhf(x); }
__device__ inline double device_tanh(double x) { return tanh(x); }

template <typename T>
__device__ inline bool device_isnan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    return false;
  }
}

// std::max / std::min exactly: the first argument wins unless the second compares greater
// (smaller), which fixes what a NaN operand gives the same way as on the CPU.
template <typename T>
__device__ inline T std_max(T a, T b) { return (a < b) ? b : a; }
template <typename T>
__device__ inline T std_min(T a, T b) { return (b < a) ? b : a; }

}  // namespace sublet::ops::cuda
