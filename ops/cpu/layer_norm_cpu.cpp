#include "ops/cpu/layer_norm_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sublet::ops::cpu {

namespace {
constexpr std::int64_t kColumnBlock = 64;  // columns one thread owns in the weight/bias gradient
}

template <typename T>
void layer_norm_forward(const Context&, const LayerNormShape& s, DType, const void* input, const void* weight,
                        const void* bias, double eps, void* output, void* mean, void* rstd) {
  const T* x = static_cast<const T*>(input);
  const T* w = static_cast<const T*>(weight);
  const T* b = static_cast<const T*>(bias);
  T* y = static_cast<T*>(output);
  T* mean_out = static_cast<T*>(mean);
  T* rstd_out = static_cast<T*>(rstd);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < s.rows; ++r) {
    const T* row = x + r * s.cols;
    double sum = 0;
    for (std::int64_t c = 0; c < s.cols; ++c) sum += row[c];
    const double mu = sum / static_cast<double>(s.cols);
    double squares = 0;  // two passes: no cancellation for rows far from zero
    for (std::int64_t c = 0; c < s.cols; ++c) squares += (row[c] - mu) * (row[c] - mu);
    const double inv = 1.0 / std::sqrt(squares / static_cast<double>(s.cols) + eps);
    T* out = y + r * s.cols;
    for (std::int64_t c = 0; c < s.cols; ++c) {
      double v = (row[c] - mu) * inv;
      if (w != nullptr) v *= w[c];
      if (b != nullptr) v += b[c];
      out[c] = static_cast<T>(v);
    }
    mean_out[r] = static_cast<T>(mu);
    rstd_out[r] = static_cast<T>(inv);
  }
}

template <typename T>
void layer_norm_backward(const Context&, const LayerNormShape& s, DType, const void* grad_output, const void* input,
                         const void* weight, const void* mean, const void* rstd, void* grad_input,
                         void* grad_weight, void* grad_bias) {
  const T* dy = static_cast<const T*>(grad_output);
  const T* x = static_cast<const T*>(input);
  const T* w = static_cast<const T*>(weight);
  const T* mu = static_cast<const T*>(mean);
  const T* inv = static_cast<const T*>(rstd);
  if (grad_input != nullptr) {
    T* dx = static_cast<T*>(grad_input);
    const double n = static_cast<double>(s.cols);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < s.rows; ++r) {
      const T* xr = x + r * s.cols;
      const T* gr = dy + r * s.cols;
      const double m = mu[r], k = inv[r];
      // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight.
      double sum_g = 0, sum_g_xhat = 0;
      for (std::int64_t c = 0; c < s.cols; ++c) {
        const double g = w != nullptr ? gr[c] * static_cast<double>(w[c]) : static_cast<double>(gr[c]);
        sum_g += g;
        sum_g_xhat += g * (xr[c] - m) * k;
      }
      T* out = dx + r * s.cols;
      for (std::int64_t c = 0; c < s.cols; ++c) {
        const double g = w != nullptr ? gr[c] * static_cast<double>(w[c]) : static_cast<double>(gr[c]);
        const double xhat = (xr[c] - m) * k;
        out[c] = static_cast<T>(k * (g - sum_g / n - xhat * sum_g_xhat / n));
      }
    }
  }
  if (grad_weight == nullptr && grad_bias == nullptr) return;
  T* dw = static_cast<T*>(grad_weight);
  T* db = static_cast<T*>(grad_bias);
  const std::int64_t blocks = (s.cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t begin = blk * kColumnBlock, end = std::min(s.cols, begin + kColumnBlock);
    std::vector<double> sum_w(static_cast<std::size_t>(end - begin), 0.0), sum_b(sum_w.size(), 0.0);
    for (std::int64_t r = 0; r < s.rows; ++r) {
      const T* xr = x + r * s.cols;
      const T* gr = dy + r * s.cols;
      const double m = mu[r], k = inv[r];
      for (std::int64_t c = begin; c < end; ++c) {
        sum_w[static_cast<std::size_t>(c - begin)] += gr[c] * (xr[c] - m) * k;
        sum_b[static_cast<std::size_t>(c - begin)] += gr[c];
      }
    }
    for (std::int64_t c = begin; c < end; ++c) {
      if (dw != nullptr) dw[c] = static_cast<T>(sum_w[static_cast<std::size_t>(c - begin)]);
      if (db != nullptr) db[c] = static_cast<T>(sum_b[static_cast<std::size_t>(c - begin)]);
    }
  }
}

#define SUBLET_INSTANTIATE_LAYER_NORM_CPU(T)                                                                        \
  template void layer_norm_forward<T>(const Context&, const LayerNormShape&, DType, const void*, const void*,      \
                                      const void*, double, void*, void*, void*);                                   \
  template void layer_norm_backward<T>(const Context&, const LayerNormShape&, DType, const void*, const void*,     \
                                       const void*, const void*, const void*, void*, void*, void*);
SUBLET_INSTANTIATE_LAYER_NORM_CPU(float)
SUBLET_INSTANTIATE_LAYER_NORM_CPU(double)
#undef SUBLET_INSTANTIATE_LAYER_NORM_CPU

}  // namespace sublet::ops::cpu
