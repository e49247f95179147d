#pragma once
// The per-element term, the finish of the global norm and the clip coefficient of
// ops/multi_tensor_norm.h, shared by the CPU and CUDA kernels (host and device) so that both
// devices evaluate the same formulas.
#include <cmath>

#if defined(__CUDACC__)
#define SUBLET_NORM_HD __host__ __device__
#else
#define SUBLET_NORM_HD
#endif

namespace sublet::ops::norm_math {

// What is summed (or, for Max, maximised) per element. Squares is the p = 2 fast path.
enum class NormKind { Squares, Abs, Pow, Max };

inline NormKind kind_of(double norm_type) {
  if (std::isinf(norm_type)) return NormKind::Max;
  if (norm_type == 2.0) return NormKind::Squares;
  if (norm_type == 1.0) return NormKind::Abs;
  return NormKind::Pow;
}

template <NormKind K, typename V>
SUBLET_NORM_HD inline V term(V x, V p) {
  using std::fabs;
  using std::pow;
  if constexpr (K == NormKind::Squares) {
    return x * x;
  } else if constexpr (K == NormKind::Pow) {
    return pow(fabs(x), p);
  } else {
    return fabs(x);
  }
}

// Sum, or a maximum that keeps a NaN from either side (as Tensor::max does).
template <NormKind K, typename V>
SUBLET_NORM_HD inline V combine(V a, V b) {
  if constexpr (K == NormKind::Max) {
    return (a > b || a != a) ? a : b;
  } else {
    return a + b;
  }
}

// The norm from the combined terms, in float64 (rounded once by the caller).
template <NormKind K>
SUBLET_NORM_HD inline double finish(double total, double p) {
  using std::pow;
  using std::sqrt;
  if constexpr (K == NormKind::Squares) {
    return sqrt(total);
  } else if constexpr (K == NormKind::Pow) {
    return pow(total, 1.0 / p);
  } else {
    return total;
  }
}

// min(1, max_norm / (norm + 1e-6)) as PyTorch computes it in the norm's dtype V (a reciprocal,
// then a multiply); a NaN norm gives NaN, an infinite one 0.
template <typename V>
SUBLET_NORM_HD inline V clip_coefficient(V norm, double max_norm) {
  const V coefficient = (V(1) / (norm + V(1e-6))) * V(max_norm);
  return coefficient < V(1) || coefficient != coefficient ? coefficient : V(1);
}

}  // namespace sublet::ops::norm_math
