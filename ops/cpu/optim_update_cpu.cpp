// Plain loops, one parameter at a time, elements split over the OpenMP threads. Each line is one
// Tensor op of runtime/optim's reference path (same order, scalars cast to T where it casts
// them), so the two paths round alike. The scalar array, found-inf flag and inverse scale of
// UpdateScalars are host memory on the CPU and are read as the CUDA kernels read theirs, so the
// CPU tests cover the same semantics (skip, unscale, counts advanced by the launch).
#include "ops/cpu/optim_update_cpu.h"

#include <cmath>
#include <limits>


namespace sublet::ops::cpu {
namespace {

// Where the count of tensors[i] is in UpdateScalars::device (after its first element, lr).
template <typename Tensor>
std::int64_t slot_of(const Tensor& t, std::size_t i) {
  return 1 + (t.step_slot >= 0 ? t.step_slot : static_cast<std::int64_t>(i));
}

// The loss-scaling part of a launch: true when the found-inf flag says to change nothing;
// otherwise advances the counts (UpdateScalars::advance_counts) before the update reads them.
template <typename Tensors>
bool skip_or_advance(Tensors tensors, const UpdateScalars& s) {
  if (s.found_inf && *s.found_inf != 0.0f) return true;  // NaN != 0 too
  if (s.advance_counts) {
    for (std::size_t i = 0; i < tensors.size(); ++i) s.device[slot_of(tensors[i], i)] += 1.0;
    if (s.counter_slot >= 0) s.device[1 + s.counter_slot] += 1.0;
  }
  return false;
}

// g (still scaled when inv_scale is given: unscaled and written back, as a separate mul_ would).
template <typename T>
inline T unscaled_grad(T* grad, std::int64_t i, const T* inv_scale) {
  if (!inv_scale) return grad[i];
  const T g = static_cast<T>(grad[i] * *inv_scale);
  grad[i] = g;
  return g;
}

template <typename T>
void sgd_one(const SgdTensor& t, const SgdHyper& h, double lr, bool first_update, const T* inv_scale) {
  T* p = static_cast<T*>(t.param);
  T* grad = static_cast<T*>(t.grad);
  T* buf = static_cast<T*>(t.momentum_buffer);
  const T weight_decay = static_cast<T>(h.weight_decay);
  const T momentum = static_cast<T>(h.momentum);
  const T keep = static_cast<T>(1.0 - h.dampening);
  const T step = static_cast<T>(-lr);
  const bool decay = h.weight_decay != 0.0, use_momentum = h.momentum != 0.0;
  const bool first = first_update, nesterov = h.nesterov;
#pragma omp parallel for schedule(static) if (t.numel > 32768)
  for (std::int64_t i = 0; i < t.numel; ++i) {
    T g = unscaled_grad(grad, i, inv_scale);
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
void adam_one(const AdamTensor& t, const AdamHyper& h, double lr, double step, const T* inv_scale) {
  T* p = static_cast<T*>(t.param);
  T* grad = static_cast<T*>(t.grad);
  T* m = static_cast<T*>(t.exp_avg);
  T* v = static_cast<T*>(t.exp_avg_sq);
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
    T g = unscaled_grad(grad, i, inv_scale);
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

// The inverse scale in the element type, as the unscaling mul_ casts it (null: not scaled).
template <typename T>
struct InverseScale {
  T value{};
  const T* get() const { return present ? &value : nullptr; }
  bool present = false;
  explicit InverseScale(const float* inv_scale) {
    if (inv_scale) {
      value = static_cast<T>(*inv_scale);
      present = true;
    }
  }
};

template <typename T>
void sgd_update(const Context&, DType, std::span<const SgdTensor> tensors, const SgdHyper& hyper,
                const UpdateScalars& scalars) {
  if (skip_or_advance(tensors, scalars)) return;
  const double lr = scalars.device ? scalars.device[0] : scalars.lr;
  const InverseScale<T> inv(scalars.inv_scale);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const bool first = tensors[i].first || (scalars.advance_counts && scalars.device[slot_of(tensors[i], i)] == 1.0);
    sgd_one<T>(tensors[i], hyper, lr, first, inv.get());
  }
}

template <typename T>
void adam_update(const Context&, DType, std::span<const AdamTensor> tensors, const AdamHyper& hyper,
                 const UpdateScalars& scalars) {
  if (skip_or_advance(tensors, scalars)) return;
  const double lr = scalars.device ? scalars.device[0] : scalars.lr;
  const InverseScale<T> inv(scalars.inv_scale);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const double step = scalars.device ? scalars.device[slot_of(tensors[i], i)] : static_cast<double>(tensors[i].step);
    adam_one<T>(tensors[i], hyper, lr, step, inv.get());
  }
}

template <typename T>
void mark_non_finite(const Context&, DType, std::span<const FiniteCheckTensor> tensors, float* found_inf) {
  for (const FiniteCheckTensor& t : tensors) {
    const T* data = static_cast<const T*>(t.data);
    for (std::int64_t i = 0; i < t.numel; ++i) {
      if (!std::isfinite(data[i])) {
        *found_inf = std::numeric_limits<float>::quiet_NaN();
        return;
      }
    }
  }
}

template void sgd_update<float>(const Context&, DType, std::span<const SgdTensor>, const SgdHyper&,
                                const UpdateScalars&);
template void sgd_update<double>(const Context&, DType, std::span<const SgdTensor>, const SgdHyper&,
                                 const UpdateScalars&);
template void adam_update<float>(const Context&, DType, std::span<const AdamTensor>, const AdamHyper&,
                                 const UpdateScalars&);
template void adam_update<double>(const Context&, DType, std::span<const AdamTensor>, const AdamHyper&,
                                  const UpdateScalars&);
template void mark_non_finite<float>(const Context&, DType, std::span<const FiniteCheckTensor>, float*);
template void mark_non_finite<double>(const Context&, DType, std::span<const FiniteCheckTensor>, float*);

}  // namespace sublet::ops::cpu
