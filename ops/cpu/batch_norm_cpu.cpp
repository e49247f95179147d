#include "ops/cpu/batch_norm_cpu.h"

#include <Eigen/Core>
#include <cmath>
#include <cstdint>

namespace sublet::ops::cpu {

namespace {

// One spatial run as an Eigen array: its reductions are vectorised (a plain loop summing into
// a double is not, as the compiler may not reorder the additions). Each run (H*W values) is
// summed in T, and the runs are summed in double across the batch.
template <typename T>
Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> as_array(const T* run, std::int64_t len) {
  return Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(run, len);
}

// Calls visit(pointer, count) for each of the N contiguous spatial runs of channel c.
template <typename T, typename Visit>
void for_each_run(const BatchNormShape& s, std::int64_t c, T* base, Visit&& visit) {
  const std::int64_t spatial = s.spatial();
  for (std::int64_t n = 0; n < s.batch; ++n) visit(base + (n * s.channels + c) * spatial, spatial);
}

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
struct GradSums {
  double grad = 0, grad_times_centered = 0;
};
template <typename T>
GradSums grad_sums(const BatchNormShape& s, std::int64_t c, const T* grad_output, const T* input,
                   double mean) {
  GradSums sums;
  const std::int64_t spatial = s.spatial();
  const T mean_t = static_cast<T>(mean);
  for (std::int64_t n = 0; n < s.batch; ++n) {
    const std::int64_t offset = (n * s.channels + c) * spatial;
    const auto g = as_array(grad_output + offset, spatial);
    sums.grad += g.sum();
    sums.grad_times_centered += (g * (as_array(input + offset, spatial) - mean_t)).sum();
  }
  return sums;
}

}  // namespace

template <typename T>
void batch_norm_forward_training(const BatchNormShape& s, const T* input, const T* weight,
                                 const T* bias, T* running_mean, T* running_var, double momentum,
                                 double eps, T* output, T* save_mean, T* save_invstd) {
  const double count = static_cast<double>(s.batch * s.spatial());
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < s.channels; ++c) {
    // Two passes (mean, then squared deviations): stable where E[x^2] - E[x]^2 is not.
    double sum = 0;
    for_each_run(s, c, input, [&](const T* run, std::int64_t len) { sum += as_array(run, len).sum(); });
    const double mean = sum / count;
    double squares = 0;
    const T mean_t = static_cast<T>(mean);
    for_each_run(s, c, input, [&](const T* run, std::int64_t len) {
      squares += (as_array(run, len) - mean_t).square().sum();
    });
    const double var_biased = squares / count;
    const double invstd = 1.0 / std::sqrt(var_biased + eps);
    save_mean[c] = static_cast<T>(mean);
    save_invstd[c] = static_cast<T>(invstd);
    if (running_mean != nullptr) {
      running_mean[c] = static_cast<T>((1 - momentum) * running_mean[c] + momentum * mean);
    }
    if (running_var != nullptr) {
      const double var_unbiased = squares / (count - 1);
      running_var[c] = static_cast<T>((1 - momentum) * running_var[c] + momentum * var_unbiased);
    }
    const double scale = invstd * (weight ? static_cast<double>(weight[c]) : 1.0);
    const double shift = (bias ? static_cast<double>(bias[c]) : 0.0) - mean * scale;
    scale_shift_channel(s, c, input, output, scale, shift);
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
    const GradSums sums = grad_sums(s, c, grad_output, input, mean);
    if (grad_weight != nullptr) grad_weight[c] = static_cast<T>(sums.grad_times_centered * invstd);
    if (grad_bias != nullptr) grad_bias[c] = static_cast<T>(sums.grad);
    if (grad_input == nullptr) continue;
    // d/dx of the normalised output, with mean and variance depending on x:
    // gx = w*invstd * (g - mean(g) - xhat * mean(g*xhat)), xhat = (x-mean)*invstd.
    const double w = weight ? static_cast<double>(weight[c]) : 1.0;
    const T scale = static_cast<T>(w * invstd);
    const T grad_mean = static_cast<T>(sums.grad / count);
    const T centered_coefficient = static_cast<T>(sums.grad_times_centered / count * invstd * invstd);
    const T mean_t = static_cast<T>(mean);
    const std::int64_t spatial = s.spatial();
    for (std::int64_t n = 0; n < s.batch; ++n) {
      const std::int64_t offset = (n * s.channels + c) * spatial;
      Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> out(grad_input + offset, spatial);
      out = scale * (as_array(grad_output + offset, spatial) - grad_mean -
                     (as_array(input + offset, spatial) - mean_t) * centered_coefficient);
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
      const GradSums sums = grad_sums(s, c, grad_output, input, mean);
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
