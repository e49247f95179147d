#include "runtime/nn/clip_grad.h"

#include <cmath>
#include <string>

#include "core/errors.h"
#include "ops/multi_tensor_norm.h"
#include "ops/multi_tensor_norm_kernels.h"
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

// The per-gradient Tensor ops: a few launches per gradient. For gradients the multi-tensor
// kernels cannot read as one array (not dense) or a device without them.
Tensor clip_with_tensor_ops(std::vector<Tensor>& grads, double max_norm, double norm_type, DType acc) {
  Tensor total;
  for (const Tensor& g : grads) {
    const Tensor c = contribution(g, norm_type, acc);
    total = !total.defined() ? c : (std::isinf(norm_type) ? total.maximum(c) : total.add(c));
  }
  if (!std::isinf(norm_type)) total = norm_type == 2.0 ? total.sqrt() : total.pow(1.0 / norm_type);
  // min(max_norm / (norm + 1e-6), 1): clamp's upper bound; a NaN norm gives a NaN scale.
  const Tensor scale = total.add(1e-6).pow(-1.0).mul(max_norm).clamp(0.0, 1.0);
  for (Tensor& g : grads) g.mul_(scale.to(g.dtype()));
  return total;
}

bool multi_tensor_readable(const Tensor& g) {
  const DType d = g.dtype();
  const bool floating = d == DType::Float32 || d == DType::Float64 || d == DType::BFloat16 || d == DType::Float16;
  return floating && g.is_non_overlapping_and_dense();
}

// The whole list in a few launches (ops/multi_tensor_norm.h): the norm is written to a 0-dim
// tensor on the device and the scale is read from it there, so nothing waits for the device.
Tensor clip_with_multi_tensor_kernels(std::vector<Tensor>& grads, double max_norm, double norm_type, DType acc) {
  const Device device = grads.front().device();
  std::vector<ops::NormTensor> tensors;
  tensors.reserve(grads.size());
  for (Tensor& g : grads) {
    tensors.push_back({g.data_ptr(), g.numel(), g.dtype()});
    g.storage().bump_version();  // an in-place change, as mul_() would record
  }
  Tensor total = empty({}, TensorOptions().dtype(acc).device(device));
  const ops::Context ctx = ops::Context::for_device(device);
  ops::multi_tensor_norm(ctx, acc, tensors, norm_type, total.data_ptr());
  ops::multi_tensor_clip_scale(ctx, acc, tensors, total.data_ptr(), max_norm);
  return total;
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
  bool multi_tensor = ops::multi_tensor_norm_kernels().has(device.type, acc) &&
                      ops::multi_tensor_clip_scale_kernels().has(device.type, acc);
  for (const Tensor& g : grads) {
    if (g.device() != device) {
      throw ValueError("clip_grad_norm_: gradients on " + device.str() + " and " + g.device().str() +
                       "; clip each device's parameters separately");
    }
    multi_tensor = multi_tensor && multi_tensor_readable(g);
  }
  return multi_tensor ? clip_with_multi_tensor_kernels(grads, max_norm, norm_type, acc)
                      : clip_with_tensor_ops(grads, max_norm, norm_type, acc);
}

double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type) {
  return clip_grad_norm_tensor_(parameters, max_norm, norm_type).item<double>();
}

}  // namespace sublet::nn::utils
