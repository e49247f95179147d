#include "ops/cpu/softmax_cpu.h"

#include <algorithm>
#include <cmath>

namespace sublet::ops::cpu {

template <typename T>
void softmax_forward(const Context&, const ClassScoresShape& s, DType, const void* input, void* output) {
  const T* x = static_cast<const T*>(input);
  T* y = static_cast<T*>(output);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < s.batch; ++r) {
    const T* row = x + r * s.classes;
    T* out = y + r * s.classes;
    const double max = *std::max_element(row, row + s.classes);
    double sum = 0;
    for (std::int64_t j = 0; j < s.classes; ++j) sum += std::exp(row[j] - max);
    for (std::int64_t j = 0; j < s.classes; ++j) out[j] = static_cast<T>(std::exp(row[j] - max) / sum);
  }
}

template <typename T>
void softmax_backward(const Context&, const ClassScoresShape& s, DType, const void* grad_output, const void* output,
                      void* grad_input) {
  const T* g = static_cast<const T*>(grad_output);
  const T* y = static_cast<const T*>(output);
  T* dx = static_cast<T*>(grad_input);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < s.batch; ++r) {
    const std::int64_t base = r * s.classes;
    double dot = 0;
    for (std::int64_t j = 0; j < s.classes; ++j) dot += static_cast<double>(g[base + j]) * y[base + j];
    for (std::int64_t j = 0; j < s.classes; ++j) dx[base + j] = static_cast<T>(y[base + j] * (g[base + j] - dot));
  }
}

template void softmax_forward<float>(const Context&, const ClassScoresShape&, DType, const void*, void*);
template void softmax_forward<double>(const Context&, const ClassScoresShape&, DType, const void*, void*);
template void softmax_backward<float>(const Context&, const ClassScoresShape&, DType, const void*, const void*, void*);
template void softmax_backward<double>(const Context&, const ClassScoresShape&, DType, const void*, const void*,
                                       void*);

}  // namespace sublet::ops::cpu
