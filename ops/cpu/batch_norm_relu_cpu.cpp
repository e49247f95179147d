#include "ops/cpu/batch_norm_relu_cpu.h"

#include <cstdint>
#include <vector>

#include "ops/cpu/batch_norm_cpu_detail.h"

namespace sublet::ops::cpu {

namespace {

// A scratch run for the masked gradient when the caller wants no grad_residual to hold it. Eigen's
// vectorised sum starts its packets at the first aligned element, so the order of its additions
// depends on the address modulo the packet size: the scratch run is placed at the address of
// grad_output's run modulo 64 bytes, so that the sums equal batch norm's over the masked
// gradient (which lives where grad_output does) bit for bit.
template <typename T>
class ScratchRun {
 public:
  explicit ScratchRun(std::int64_t len) : storage_(static_cast<std::size_t>(len) + kAlign / sizeof(T)) {}
  T* like(const T* other) {
    const auto base = reinterpret_cast<std::uintptr_t>(storage_.data());
    const auto want = reinterpret_cast<std::uintptr_t>(other) % kAlign;
    const std::uintptr_t shift = (want + kAlign - base % kAlign) % kAlign;  // a multiple of sizeof(T)
    return storage_.data() + shift / sizeof(T);
  }

 private:
  static constexpr std::uintptr_t kAlign = 64;
  std::vector<T> storage_;
};

// masked = grad_output where output > 0, else 0 (as BinaryOp::ReluBackward).
template <typename T>
void mask_run(const T* grad_output, const T* output, std::int64_t len, T* masked) {
  for (std::int64_t i = 0; i < len; ++i) masked[i] = output[i] > T(0) ? grad_output[i] : T(0);
}

}  // namespace

template <typename T>
void batch_norm_relu_forward_training(const BatchNormShape& s, const T* input, const T* residual,
                                      const T* weight, const T* bias, T* running_mean, T* running_var,
                                      double momentum, double eps, T* output, T* save_mean, T* save_invstd) {
  const std::int64_t spatial = s.spatial();
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < s.channels; ++c) {
    const detail::ScaleShift affine = detail::training_statistics(s, c, input, weight, bias, running_mean,
                                                                  running_var, momentum, eps, save_mean, save_invstd);
    const T scale = static_cast<T>(affine.scale), shift = static_cast<T>(affine.shift);
    for (std::int64_t n = 0; n < s.batch; ++n) {
      const std::int64_t offset = (n * s.channels + c) * spatial;
      const T* x = input + offset;
      T* y = output + offset;
      // Rounded as batch norm's output, then the add, then relu (x > 0 ? x : 0, NaN to 0).
      if (residual != nullptr) {
        const T* r = residual + offset;
        for (std::int64_t i = 0; i < spatial; ++i) {
          const T normalised = x[i] * scale + shift;
          const T sum = normalised + r[i];
          y[i] = sum > T(0) ? sum : T(0);
        }
      } else {
        for (std::int64_t i = 0; i < spatial; ++i) {
          const T normalised = x[i] * scale + shift;
          y[i] = normalised > T(0) ? normalised : T(0);
        }
      }
    }
  }
}

template <typename T>
void batch_norm_relu_backward_training(const BatchNormShape& s, const T* grad_output, const T* output,
                                       const T* input, const T* weight, const T* save_mean,
                                       const T* save_invstd, T* grad_input, T* grad_weight, T* grad_bias,
                                       T* grad_residual) {
  const std::int64_t spatial = s.spatial();
  const double count = static_cast<double>(s.batch * spatial);
#pragma omp parallel
  {
    // Each thread's scratch; unused where grad_residual holds the masked gradient.
    ScratchRun<T> scratch(grad_residual != nullptr ? 0 : spatial);
#pragma omp for schedule(static)
    for (std::int64_t c = 0; c < s.channels; ++c) {
      const double mean = save_mean[c], invstd = save_invstd[c];
      const T mean_t = static_cast<T>(mean);
      // The masked run of image n: in grad_residual (which is it), or in the scratch run.
      auto masked_run = [&](std::int64_t offset) {
        T* masked = grad_residual != nullptr ? grad_residual + offset : scratch.like(grad_output + offset);
        mask_run(grad_output + offset, output + offset, spatial, masked);
        return masked;
      };
      detail::GradSums sums;
      for (std::int64_t n = 0; n < s.batch; ++n) {
        const std::int64_t offset = (n * s.channels + c) * spatial;
        detail::add_grad_sums(sums, static_cast<const T*>(masked_run(offset)), input + offset, spatial, mean_t);
      }
      if (grad_weight != nullptr) grad_weight[c] = static_cast<T>(sums.grad_times_centered * invstd);
      if (grad_bias != nullptr) grad_bias[c] = static_cast<T>(sums.grad);
      if (grad_input == nullptr) continue;
      const detail::InputGradCoefficients k =
          detail::input_grad_coefficients(sums, count, weight ? static_cast<double>(weight[c]) : 1.0, invstd);
      for (std::int64_t n = 0; n < s.batch; ++n) {
        const std::int64_t offset = (n * s.channels + c) * spatial;
        const T* masked = grad_residual != nullptr ? grad_residual + offset : masked_run(offset);
        detail::input_grad_run(k, mean_t, masked, input + offset, spatial, grad_input + offset);
      }
    }
  }
}

#define SUBLET_INSTANTIATE_BATCH_NORM_RELU_CPU(T)                                                              \
  template void batch_norm_relu_forward_training<T>(const BatchNormShape&, const T*, const T*, const T*,       \
                                                    const T*, T*, T*, double, double, T*, T*, T*);             \
  template void batch_norm_relu_backward_training<T>(const BatchNormShape&, const T*, const T*, const T*,      \
                                                     const T*, const T*, const T*, T*, T*, T*, T*);
SUBLET_INSTANTIATE_BATCH_NORM_RELU_CPU(float)
SUBLET_INSTANTIATE_BATCH_NORM_RELU_CPU(double)
#undef SUBLET_INSTANTIATE_BATCH_NORM_RELU_CPU

}  // namespace sublet::ops::cpu
