#include "ops/cpu/gelu_cpu.h"

#include <cmath>

#include "ops/gelu_math.h"

namespace sublet::ops::cpu {

template <typename T>
void gelu_forward(const Context&, DType, std::int64_t numel, GeluApproximate approximate, const void* input,
                  void* output) {
  const T* x = static_cast<const T*>(input);
  T* y = static_cast<T*>(output);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < numel; ++i) y[i] = gelu_math::value<T>(x[i], approximate);
}

template <typename T>
void gelu_backward(const Context&, DType, std::int64_t numel, GeluApproximate approximate, const void* grad_output,
                   const void* input, void* grad_input) {
  const T* g = static_cast<const T*>(grad_output);
  const T* x = static_cast<const T*>(input);
  T* out = static_cast<T*>(grad_input);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < numel; ++i) out[i] = g[i] * gelu_math::derivative<T>(x[i], approximate);
}

template void gelu_forward<float>(const Context&, DType, std::int64_t, GeluApproximate, const void*, void*);
template void gelu_forward<double>(const Context&, DType, std::int64_t, GeluApproximate, const void*, void*);
template void gelu_backward<float>(const Context&, DType, std::int64_t, GeluApproximate, const void*, const void*,
                                   void*);
template void gelu_backward<double>(const Context&, DType, std::int64_t, GeluApproximate, const void*, const void*,
                                    void*);

}  // namespace sublet::ops::cpu
