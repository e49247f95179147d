#pragma once
// What the CPU batch norm kernels (batch_norm_cpu.cpp) and the fused batch norm + ReLU ones
// (batch_norm_relu_cpu.cpp) share: the per-channel statistics and gradient sums, written once so
// that the fused kernels give batch norm + add + relu's values bit for bit.
#include <Eigen/Core>
#include <cmath>
#include <cstdint>

#include "ops/batch_norm.h"

namespace sublet::ops::cpu::detail {

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

// Channel c's batch statistics: saves mean and invstd, moves the running statistics, and returns
// the affine form out = in * scale + shift of its normalisation (weight and bias folded in).
struct ScaleShift {
  double mean = 0, scale = 0, shift = 0;
};
// Channel c's statistics from the sum of its values' deviations squared (count values, mean
// given): saves mean and invstd, moves the running statistics, returns the affine form.
template <typename T>
ScaleShift channel_statistics(double mean, double squares, double count, std::int64_t c, const T* weight,
                              const T* bias, T* running_mean, T* running_var, double momentum, double eps,
                              T* save_mean, T* save_invstd) {
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
  return {mean, scale, (bias ? static_cast<double>(bias[c]) : 0.0) - mean * scale};
}

// A channel's count, mean and sum of squared deviations, added one run at a time (Chan, Golub and
// LeVeque's pairwise update, in double). Each run is read twice, its mean and then its squared
// deviations, but the second read hits L1: one pass over the activations instead of two (one
// for the mean, one for the deviations from it), and as stable where E[x^2] - E[x]^2 is not.
struct Moments {
  double count = 0, mean = 0, squares = 0;
};
template <typename T>
void add_run(Moments& m, const T* run, std::int64_t len) {
  const double n = static_cast<double>(len);
  const double run_mean = static_cast<double>(as_array(run, len).sum()) / n;
  const T centre = static_cast<T>(run_mean);
  // Deviations from the rounded mean: their squares exceed those from the exact one by n * d^2.
  const double offset = run_mean - static_cast<double>(centre);
  const double run_squares = static_cast<double>((as_array(run, len) - centre).square().sum()) - n * offset * offset;
  const double total = m.count + n, delta = run_mean - m.mean;
  m.mean += delta * n / total;
  m.squares += run_squares + delta * delta * m.count * n / total;
  m.count = total;
}

template <typename T>
ScaleShift training_statistics(const BatchNormShape& s, std::int64_t c, const T* input, const T* weight,
                               const T* bias, T* running_mean, T* running_var, double momentum, double eps,
                               T* save_mean, T* save_invstd) {
  Moments m;
  for_each_run(s, c, input, [&](const T* run, std::int64_t len) { add_run(m, run, len); });
  return channel_statistics(m.mean, m.squares, m.count, c, weight, bias, running_mean, running_var, momentum, eps,
                            save_mean, save_invstd);
}

// Sum of grad_output and of grad_output * (input - mean), over one run and accumulated in double.
struct GradSums {
  double grad = 0, grad_times_centered = 0;
};
template <typename T>
void add_grad_sums(GradSums& sums, const T* grad_output, const T* input, std::int64_t len, T mean) {
  const auto g = as_array(grad_output, len);
  sums.grad += g.sum();
  sums.grad_times_centered += (g * (as_array(input, len) - mean)).sum();
}

// The input gradient of one run of training-mode batch norm, given the channel's sums:
// gx = w*invstd * (g - mean(g) - xhat * mean(g*xhat)), xhat = (x-mean)*invstd.
struct InputGradCoefficients {
  double scale = 0, grad_mean = 0, centered = 0;
};
inline InputGradCoefficients input_grad_coefficients(const GradSums& sums, double count, double weight,
                                                     double invstd) {
  return {weight * invstd, sums.grad / count, sums.grad_times_centered / count * invstd * invstd};
}
template <typename T>
void input_grad_run(const InputGradCoefficients& k, T mean, const T* grad_output, const T* input, std::int64_t len,
                    T* grad_input) {
  const T scale = static_cast<T>(k.scale), grad_mean = static_cast<T>(k.grad_mean);
  const T centered_coefficient = static_cast<T>(k.centered);
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> out(grad_input, len);
  out = scale * (as_array(grad_output, len) - grad_mean - (as_array(input, len) - mean) * centered_coefficient);
}

}  // namespace sublet::ops::cpu::detail
