// Plain loops, one parameter at a time, elements split over the OpenMP threads. Each line is one
// Tensor op of runtime/optim's reference path (same order, scalars cast to T where it casts
// them), so the two paths round alike.
#include "ops/cpu/optim_update_cpu.h"

#include <cmath>


namespace sublet::ops::cpu {
namespace {

template <typename T>
void sgd_one(const SgdTensor& t, const SgdHyper& h, double lr) {
  T* p = static_cast<T*>(t.param);
  const T* grad = static_cast<const T*>(t.grad);
  T* buf = static_cast<T*>(t.momentum_buffer);
  const T weight_decay = static_cast<T>(h.weight_decay);
  const T momentum = static_cast<T>(h.momentum);
  const T keep = static_cast<T>(1.0 - h.dampening);
  const T step = static_cast<T>(-lr);
  const bool decay = h.weight_decay != 0.0, use_momentum = h.momentum != 0.0;
  const bool first = t.first, nesterov = h.nesterov;
#pragma omp parallel for schedule(static) if (t.numel > 32768)
  for (std::int64_t i = 0; i < t.numel; ++i) {
    T g = grad[i];
    if (decay) g = static_cast<T>(g + weight_decay * p[i]);
    if (use_momentum) {
      if (first) {
        buf[i] = g;
      } else {
        const T decayed = static_cast<T>(buf[i] * momentum);
        buf[i] = static_cast<T>(decayed + keep * g);
      }
      g = nesterov ? static_cast<T>(g + momentum * buf[i]) : buf[i];
    }
    p[i] = static_cast<T>(p[i] + step * g);
  }
}

template <typename T>
void adam_one(const AdamTensor& t, const AdamHyper& h, double lr) {
  T* p = static_cast<T*>(t.param);
  const T* grad = static_cast<const T*>(t.grad);
  T* m = static_cast<T*>(t.exp_avg);
  T* v = static_cast<T*>(t.exp_avg_sq);
  const auto step = static_cast<double>(t.step);
  const double bias_correction1 = 1.0 - std::pow(h.beta1, step);
  const double bias_correction2 = 1.0 - std::pow(h.beta2, step);
  const T beta1 = static_cast<T>(h.beta1), beta2 = static_cast<T>(h.beta2);
  const T one_minus_beta1 = static_cast<T>(1.0 - h.beta1), one_minus_beta2 = static_cast<T>(1.0 - h.beta2);
  const T weight_decay = static_cast<T>(h.weight_decay);
  const T shrink = static_cast<T>(1.0 - lr * h.weight_decay);
  const T sqrt_bc2 = static_cast<T>(std::sqrt(bias_correction2));
  const T eps = static_cast<T>(h.eps);
  const T step_size = static_cast<T>(-lr / bias_correction1);
  const bool decay = h.weight_decay != 0.0, decoupled = h.decoupled_weight_decay;
#pragma omp parallel for schedule(static) if (t.numel > 32768)
  for (std::int64_t i = 0; i < t.numel; ++i) {
    T g = grad[i];
    if (decay) {
      if (decoupled) {
        p[i] = static_cast<T>(p[i] * shrink);
      } else {
        g = static_cast<T>(g + weight_decay * p[i]);
      }
    }
    const T m_decayed = static_cast<T>(m[i] * beta1);
    m[i] = static_cast<T>(m_decayed + one_minus_beta1 * g);
    const T v_decayed = static_cast<T>(v[i] * beta2);
    v[i] = static_cast<T>(v_decayed + one_minus_beta2 * g * g);
    const T root = std::sqrt(v[i]);
    const T scaled = static_cast<T>(root / sqrt_bc2);
    const T denom = static_cast<T>(scaled + eps);
    p[i] = static_cast<T>(p[i] + step_size * m[i] / denom);
  }
}

}  // namespace

template <typename T>
void sgd_update(const Context&, DType, std::span<const SgdTensor> tensors, const SgdHyper& hyper,
                const UpdateScalars& scalars) {
  for (const SgdTensor& t : tensors) sgd_one<T>(t, hyper, scalars.lr);
}

template <typename T>
void adam_update(const Context&, DType, std::span<const AdamTensor> tensors, const AdamHyper& hyper,
                 const UpdateScalars& scalars) {
  for (const AdamTensor& t : tensors) adam_one<T>(t, hyper, scalars.lr);
}

template void sgd_update<float>(const Context&, DType, std::span<const SgdTensor>, const SgdHyper&,
                                const UpdateScalars&);
template void sgd_update<double>(const Context&, DType, std::span<const SgdTensor>, const SgdHyper&,
                                 const UpdateScalars&);
template void adam_update<float>(const Context&, DType, std::span<const AdamTensor>, const AdamHyper&,
                                 const UpdateScalars&);
template void adam_update<double>(const Context&, DType, std::span<const AdamTensor>, const AdamHyper&,
                                  const UpdateScalars&);

}  // namespace sublet::ops::cpu
