#pragma once
// Loss scaling for float16 training, as torch.cuda.amp.GradScaler (PyTorch's defaults):
//
//   amp::GradScaler scaler(device);
//   scaler.scale(loss).backward();   // gradients are scale x the true ones: small ones survive fp16
//   scaler.step(optimizer);          // unscales, and skips the step when a gradient is inf or NaN
//   scaler.update();                 // scale x0.5 after a skipped step, x2 after 2,000 clean ones
//
// The scale, the growth tracker and the inf/NaN flag are 1-element float32 tensors on the device,
// and the inf/NaN check, unscaling and the update run as device ops. step() hands the flag and
// the inverse scale to the optimizer (optim::Optimizer::step(SkipIfNonFinite)). With the fused
// update (SGD/Adam fused(true)) the update kernels unscale the gradients and skip on the device
// when the flag is set (parameters, momentum buffers, Adam's moments and step counts untouched):
// no host sync in the whole step, so scale, backward, step and update can be captured into a
// CUDA graph. Other optimizers read the flag on the host (one sync) and step or not.
//
// step()'s result. PyTorch's GradScaler.step returns optimizer.step()'s return value: None when
// it read the flag on the host and skipped; for optimizers that support amp scaling (fused
// Adam/AdamW/SGD: _step_supports_amp_scaling) it sets optimizer.found_inf / grad_scale, calls
// step() without reading the flag and returns step()'s value either way, so it cannot say
// whether the step ran. sublet's step() returns optim::StepOutcome: Stepped or Skipped when the
// flag was read on the host, DecidedOnDevice when the device decided (found_inf_tensor() or the
// optimizer's step counts tell, at the cost of a sync). An enum rather than std::optional<bool>
// so that code written for the old `bool step()` (`if (scaler.step(opt))`) stops compiling
// instead of silently testing something else.
//
// The inf/NaN check is exact without a dedicated kernel: x * 0 is 0 for every finite x and NaN
// for inf and NaN, so a gradient's sum of g * 0 is NaN exactly when it holds a non-finite value.
#include <cstdint>

#include "core/device.h"
#include "runtime/optim/optimizer.h"
#include "runtime/tensor.h"

namespace sublet::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
  bool enabled = true;  // false: every call passes through (scale 1, no checks)
};

class GradScaler {
 public:
  // ValueError for a non-positive scale, growth <= 1, backoff outside (0, 1) or interval < 1.
  explicit GradScaler(Device device, GradScalerOptions options = {});

  // loss x scale (differentiable); the loss itself when disabled.
  Tensor scale(const Tensor& loss) const;
  // Divides every gradient of the optimizer's parameters by the scale and records whether any
  // was inf or NaN. Once per step: a second call before update() is an error (as PyTorch).
  void unscale_(optim::Optimizer& optimizer);
  // The optimizer's step unless a gradient was inf or NaN, gradients unscaled first (unless
  // unscale_ did it): by the fused update kernels, or by device ops for other optimizers.
  // Returns Stepped/Skipped, or DecidedOnDevice when the device decided (see above).
  // Disabled: optimizer.step(), Stepped.
  optim::StepOutcome step(optim::Optimizer& optimizer);
  // The new scale: x backoff after a non-finite step (and the growth count restarts), x growth
  // after growth_interval finite steps in a row.
  void update();

  double current_scale() const;   // host read (a sync on the GPU)
  std::int64_t growth_tracker() const;
  // A checkpoint's scale and growth count back (PyTorch's load_state_dict): ValueError for a scale
  // that is not positive and finite or a negative count.
  void load_state(double scale, std::int64_t growth_tracker);
  const Tensor& scale_tensor() const { return scale_; }
  // NaN when a gradient since the last update() was inf or NaN, else 0 (zeroed by update()).
  const Tensor& found_inf_tensor() const { return found_inf_; }
  const GradScalerOptions& options() const { return options_; }

 private:
  GradScalerOptions options_;
  Device device_;
  Tensor scale_;           // [1] float32
  Tensor growth_tracker_;  // [1] float32: finite steps in a row (exact as a float far beyond 2,000)
  Tensor found_inf_;       // [1] float32: NaN once a non-finite gradient was seen, else 0
  bool unscaled_ = false;
  // found_inf_ = NaN if any gradient of the optimizer's parameters is inf or NaN, else 0.
  void record_non_finite(optim::Optimizer& optimizer);
};

}  // namespace sublet::amp
