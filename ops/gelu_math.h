#pragma once
// GELU and its derivative on one value, shared by the CPU and CUDA kernels (host and device)
// so that both devices evaluate the same formulas. V is float (float32 and 16-bit data) or double.
#include <cmath>

#include "ops/gelu.h"

#if defined(__CUDACC__)
#define SUBLET_GELU_HD __host__ __device__
#else
#define SUBLET_GELU_HD
#endif

namespace sublet::ops::gelu_math {

template <typename V>
SUBLET_GELU_HD inline V value(V x, GeluApproximate approximate) {
  using std::erf;
  using std::tanh;
  if (approximate == GeluApproximate::Tanh) {
    const V k = V(0.7978845608028654);  // sqrt(2 / pi)
    const V inner = k * (x + V(0.044715) * x * x * x);
    return V(0.5) * x * (V(1) + tanh(inner));
  }
  return V(0.5) * x * (V(1) + erf(x * V(0.7071067811865476)));  // 1 / sqrt(2)
}

template <typename V>
SUBLET_GELU_HD inline V derivative(V x, GeluApproximate approximate) {
  using std::erf;
  using std::exp;
  using std::tanh;
  if (approximate == GeluApproximate::Tanh) {
    const V k = V(0.7978845608028654);
    const V x2 = x * x;
    const V t = tanh(k * (x + V(0.044715) * x2 * x));
    return V(0.5) * (V(1) + t) + V(0.5) * x * (V(1) - t * t) * k * (V(1) + V(3) * V(0.044715) * x2);
  }
  const V cdf = V(0.5) * (V(1) + erf(x * V(0.7071067811865476)));
  const V pdf = exp(V(-0.5) * x * x) * V(0.3989422804014327);  // 1 / sqrt(2 pi)
  return cdf + x * pdf;
}

}  // namespace sublet::ops::gelu_math

#undef SUBLET_GELU_HD
