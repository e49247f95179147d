#include "ops/cpu/batch_norm_cpu.h"

#include <cmath>
#include <cstdint>

#include "ops/cpu/batch_norm_cpu_detail.h"

namespace sublet::ops::cpu {

namespace {

// out = in * scale + shift over channel c (the affine form of every normalisation here).
template <typename T>
void scale_shift_channel(const BatchNormShape& s, std::int64_t c, const T* input, T* output,
                         double scale, double shift) {
  const std::int64_t spatial = s.spatial();
  const T scale_t = static_cast<T>(scale), shift_t = static_cast<T>(shift);
  for (std::int64_t n = 0; n < s.batch; ++n) {
    const std::int64_t offset = (n * s.channels + c) * spatial;
    for (std::int64_t i = 0; i < spatial; ++i) output[offset + i] = input[offset + i] * scale_t + shift_t;
  }
}

// Sum of grad_output and of grad_output * (input - mean) over channel c.
template <typename T>
detail::GradSums grad_sums(const BatchNormShape& s, std::int64_t c, const T* grad_output, const T* input,
                           double mean) {
  detail::GradSums sums;
  const std::int64_t spatial = s.spatial();
  const T mean_t = static_cast<T>(mean);
  for (std::int64_t n = 0; n < s.batch; ++n) {
    const std::int64_t offset = (n * s.channels + c) * spatial;
    detail::add_grad_sums(sums, grad_output + offset, input + offset, spatial, mean_t);
  }
  return sums;
}

}  // namespace

template <typename T>
void batch_norm_forward_training(const BatchNormShape& s, const T* input, const T* weight,
                                 const T* bias, T* running_mean, T* running_var, double momentum,
                                 double eps, T* output, T* save_mean, T* save_invstd) {
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < s.channels; ++c) {
    const detail::ScaleShift affine = detail::training_statistics(s, c, input, weight, bias, running_mean,
                                                                  running_var, momentum, eps, save_mean, save_invstd);
    scale_shift_channel(s, c, input, output, affine.scale, affine.shift);
  }
}

template <typename T>
void batch_norm_forward_eval(const BatchNormShape& s, const T* input, const T* weight,
                             const T* bias, const T* running_mean, const T* running_var,
                             double eps, T* output) {
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < s.channels; ++c) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var[c]) + eps);
    const double scale = invstd * (weight ? static_cast<double>(weight[c]) : 1.0);
    const double shift = (bias ? static_cast<double>(bias[c]) : 0.0) - running_mean[c] * scale;
    scale_shift_channel(s, c, input, output, scale, shift);
  }
}

template <typename T>
void batch_norm_backward_training(const BatchNormShape& s, const T* grad_output, const T* input,
                                  const T* weight, const T* save_mean, const T* save_invstd,
                                  T* grad_input, T* grad_weight, T* grad_bias) {
  const double count = static_cast<double>(s.batch * s.spatial());
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < s.channels; ++c) {
    const double mean = save_mean[c], invstd = save_invstd[c];
    const detail::GradSums sums = grad_sums(s, c, grad_output, input, mean);
    if (grad_weight != nullptr) grad_weight[c] = static_cast<T>(sums.grad_times_centered * invstd);
    if (grad_bias != nullptr) grad_bias[c] = static_cast<T>(sums.grad);
    if (grad_input == nullptr) continue;
    const detail::InputGradCoefficients k =
        detail::input_grad_coefficients(sums, count, weight ? static_cast<double>(weight[c]) : 1.0, invstd);
    const T mean_t = static_cast<T>(mean);
    const std::int64_t spatial = s.spatial();
    for (std::int64_t n = 0; n < s.batch; ++n) {
      const std::int64_t offset = (n * s.channels + c) * spatial;
      detail::input_grad_run(k, mean_t, grad_output + offset, input + offset, spatial, grad_input + offset);
    }
  }
}

template <typename T>
void batch_norm_backward_eval(const BatchNormShape& s, const T* grad_output, const T* input,
                              const T* weight, const T* running_mean, const T* running_var,
                              double eps, T* grad_input, T* grad_weight, T* grad_bias) {
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < s.channels; ++c) {
    const double mean = running_mean[c];
    const double invstd = 1.0 / std::sqrt(static_cast<double>(running_var[c]) + eps);
    if (grad_weight != nullptr || grad_bias != nullptr) {
      const detail::GradSums sums = grad_sums(s, c, grad_output, input, mean);
      if (grad_weight != nullptr) grad_weight[c] = static_cast<T>(sums.grad_times_centered * invstd);
      if (grad_bias != nullptr) grad_bias[c] = static_cast<T>(sums.grad);
    }
    if (grad_input != nullptr) {
      const double scale = invstd * (weight ? static_cast<double>(weight[c]) : 1.0);
      scale_shift_channel(s, c, grad_output, grad_input, scale, 0.0);
    }
  }
}

#define SUBLET_INSTANTIATE_BATCH_NORM_CPU(T)                                                    \
  template void batch_norm_forward_training<T>(const BatchNormShape&, const T*, const T*,        \
                                               const T*, T*, T*, double, double, T*, T*, T*);    \
  template void batch_norm_forward_eval<T>(const BatchNormShape&, const T*, const T*, const T*,  \
                                           const T*, const T*, double, T*);                      \
  template void batch_norm_backward_training<T>(const BatchNormShape&, const T*, const T*,       \
                                                const T*, const T*, const T*, T*, T*, T*);       \
  template void batch_norm_backward_eval<T>(const BatchNormShape&, const T*, const T*, const T*, \
                                            const T*, const T*, double, T*, T*, T*);
SUBLET_INSTANTIATE_BATCH_NORM_CPU(float)
SUBLET_INSTANTIATE_BATCH_NORM_CPU(double)
#undef SUBLET_INSTANTIATE_BATCH_NORM_CPU

}  // namespace sublet::ops::cpu
