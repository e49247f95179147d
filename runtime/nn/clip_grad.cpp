#include "runtime/nn/clip_grad.h"

#include <cmath>
#include <string>

#include "core/errors.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"

namespace sublet::nn::utils {

namespace {

// This gradient's contribution in `acc`: its largest |g| (infinity norm) or sum |g|^p.
Tensor contribution(const Tensor& grad, double norm_type, DType acc) {
  const Tensor g = grad.to(acc);
  if (std::isinf(norm_type)) return g.maximum(g.neg()).max();
  if (norm_type == 2.0) return g.mul(g).sum();
  if (norm_type == 1.0) return g.maximum(g.neg()).sum();
  return g.maximum(g.neg()).pow(norm_type).sum();
}

}  // namespace

Tensor clip_grad_norm_tensor_(const std::vector<Tensor>& parameters, double max_norm, double norm_type) {
  if (!(norm_type >= 1.0)) {
    throw ValueError("clip_grad_norm_: norm_type must be >= 1 or infinity, got " + std::to_string(norm_type));
  }
  if (!(max_norm >= 0.0)) throw ValueError("clip_grad_norm_: max_norm must be >= 0, got " + std::to_string(max_norm));
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters) {
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return zeros({}, DType::Float32);
  const Device device = grads.front().device();
  DType acc = DType::Float32;
  for (const Tensor& g : grads) acc = g.dtype() == DType::Float64 ? DType::Float64 : acc;
  Tensor total;
  for (const Tensor& g : grads) {
    if (g.device() != device) {
      throw ValueError("clip_grad_norm_: gradients on " + device.str() + " and " + g.device().str() +
                       "; clip each device's parameters separately");
    }
    const Tensor c = contribution(g, norm_type, acc);
    total = !total.defined() ? c : (std::isinf(norm_type) ? total.maximum(c) : total.add(c));
  }
  if (!std::isinf(norm_type)) total = norm_type == 2.0 ? total.sqrt() : total.pow(1.0 / norm_type);
  // min(max_norm / (norm + 1e-6), 1): clamp's upper bound; a NaN norm gives a NaN scale.
  const Tensor scale = total.add(1e-6).pow(-1.0).mul(max_norm).clamp(0.0, 1.0);
  for (Tensor& g : grads) g.mul_(scale.to(g.dtype()));
  return total;
}

double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type) {
  return clip_grad_norm_tensor_(parameters, max_norm, norm_type).item<double>();
}

}  // namespace sublet::nn::utils
