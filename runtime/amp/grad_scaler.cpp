#include "runtime/amp/grad_scaler.h"

#include <cmath>
#include <map>
#include <vector>
#include <string>

#include "core/errors.h"
#include "ops/optim_update.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"

namespace sublet::amp {
namespace {

Tensor device_scalar(double value, Device device) {
  return full({1}, value, TensorOptions().dtype(DType::Float32).device(device));
}

// 1 / scale by a division (IEEE, correctly rounded on both devices: exact for the powers of two
// PyTorch's defaults produce), not by pow(-1), whose device form need not be correctly rounded.
Tensor inverse_of(const Tensor& scale) { return full({1}, 1.0, scale.options()).div(scale); }

// 1 where `flag` is NaN (a non-finite gradient was seen), else 0: NaN is the one value unequal
// to itself.
Tensor seen_non_finite(const Tensor& flag) { return 1.0 - flag.eq(flag); }

}  // namespace

GradScaler::GradScaler(Device device, GradScalerOptions options) : options_(options), device_(device) {
  if (!(options.init_scale > 0.0))
    throw ValueError("GradScaler: init_scale must be positive, got " + std::to_string(options.init_scale));
  if (!(options.growth_factor > 1.0))
    throw ValueError("GradScaler: growth_factor must be > 1, got " + std::to_string(options.growth_factor));
  if (!(options.backoff_factor > 0.0 && options.backoff_factor < 1.0))
    throw ValueError("GradScaler: backoff_factor must be in (0, 1), got " + std::to_string(options.backoff_factor));
  if (options.growth_interval < 1)
    throw ValueError("GradScaler: growth_interval must be >= 1, got " + std::to_string(options.growth_interval));
  scale_ = device_scalar(options.enabled ? options.init_scale : 1.0, device);
  growth_tracker_ = device_scalar(0.0, device);
  found_inf_ = device_scalar(0.0, device);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!options_.enabled) return loss;
  return loss * scale_.to(loss.dtype());
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  if (unscaled_)
    throw Error("GradScaler::unscale_ was already called for this step; call update() after step() first");
  NoGradGuard no_grad;
  record_non_finite(optimizer);
  const Tensor inverse = inverse_of(scale_);
  for (const Tensor& p : optimizer.params()) {
    Tensor g = p.grad();
    if (g.defined()) g.mul_(inverse.to(g.dtype()));
  }
  unscaled_ = true;
}

void GradScaler::record_non_finite(optim::Optimizer& optimizer) {
  found_inf_.zero_();
  // Dense float32/float64 gradients on the flag's device: one multi-tensor launch per dtype
  // (ops::mark_non_finite). Any other gradient: sum(g * 0) is NaN exactly when g holds an inf or
  // a NaN, added to the flag (a kernel or two per gradient, and a temporary of its size).
  std::map<DType, std::vector<ops::FiniteCheckTensor>> dense;
  for (const Tensor& p : optimizer.params()) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    const bool float_dtype = g.dtype() == DType::Float32 || g.dtype() == DType::Float64;
    const bool fused = g.device() == found_inf_.device() && float_dtype && g.is_non_overlapping_and_dense();
    if (fused) {
      dense[g.dtype()].push_back({g.data_ptr(), g.numel()});
    } else {
      found_inf_.add_((g * 0.0).sum().to(DType::Float32).view({1}));
    }
  }
  const ops::Context ctx = ops::Context::for_device(found_inf_.device());
  for (const auto& [dtype, tensors] : dense) ops::mark_non_finite(ctx, dtype, tensors, found_inf_.data<float>());
}

optim::StepOutcome GradScaler::step(optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return optim::StepOutcome::Stepped;
  }
  NoGradGuard no_grad;
  optim::SkipIfNonFinite skip{found_inf_, Tensor()};
  if (!unscaled_) {
    // The check alone: the step unscales (in the fused kernels, saving a pass over the gradients).
    record_non_finite(optimizer);
    skip.inv_scale = inverse_of(scale_);
    unscaled_ = true;
  }
  return optimizer.step(skip);
}

void GradScaler::update() {
  if (!options_.enabled) return;
  NoGradGuard no_grad;
  const Tensor bad = seen_non_finite(found_inf_);
  const Tensor good = 1.0 - bad;
  Tensor tracker = (growth_tracker_ + 1.0) * good;  // a bad step restarts the count
  const Tensor grow = tracker.eq(full({1}, static_cast<double>(options_.growth_interval), scale_.options()));
  const Tensor factor = bad * options_.backoff_factor + good * (grow * (options_.growth_factor - 1.0) + 1.0);
  scale_.mul_(factor);
  growth_tracker_.copy_(tracker * (1.0 - grow));
  found_inf_.zero_();
  unscaled_ = false;
}

double GradScaler::current_scale() const { return scale_.item<float>(); }

std::int64_t GradScaler::growth_tracker() const { return static_cast<std::int64_t>(growth_tracker_.item<float>()); }

void GradScaler::load_state(double scale, std::int64_t growth_tracker) {
  if (!(scale > 0.0 && std::isfinite(scale)))
    throw ValueError("GradScaler::load_state: the scale must be positive and finite, got " + std::to_string(scale));
  if (growth_tracker < 0)
    throw ValueError("GradScaler::load_state: the growth tracker must be >= 0, got " + std::to_string(growth_tracker));
  NoGradGuard no_grad;
  scale_.fill_(scale);
  growth_tracker_.fill_(static_cast<double>(growth_tracker));
}

}  // namespace sublet::amp
