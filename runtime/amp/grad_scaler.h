#pragma once
// Loss scaling for float16 training, as torch.cuda.amp.GradScaler (PyTorch's defaults):
//
//   amp::GradScaler scaler(device);
//   scaler.scale(loss).backward();   // gradients are scale x the true ones: small ones survive fp16
//   scaler.step(optimizer);          // unscales, and skips the step when a gradient is inf or NaN
//   scaler.update();                 // scale x0.5 after a skipped step, x2 after 2,000 clean ones
//
// The scale, the growth tracker and the inf/NaN flag are 1-element float32 tensors on the device,
// and unscaling, the inf/NaN check and the update run as device ops: no host sync there. step()
// reads the flag on the host to decide whether to step (one sync per step, as PyTorch's
// GradScaler with optimizers that cannot skip on the device); a device-side skip inside the
// fused optimizer kernels, which a CUDA graph could capture, is issue 15's next piece.
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
  // unscale_ (unless done already), then optimizer.step() unless a gradient was inf or NaN.
  // Returns whether the step ran.
  bool step(optim::Optimizer& optimizer);
  // The new scale: x backoff after a non-finite step (and the growth count restarts), x growth
  // after growth_interval finite steps in a row.
  void update();

  double current_scale() const;   // host read (a sync on the GPU)
  std::int64_t growth_tracker() const;
  const Tensor& scale_tensor() const { return scale_; }
  const GradScalerOptions& options() const { return options_; }

 private:
  GradScalerOptions options_;
  Device device_;
  Tensor scale_;           // [1] float32
  Tensor growth_tracker_;  // [1] float32: finite steps in a row (exact as a float far beyond 2,000)
  Tensor found_inf_;       // [1] float32: NaN once a non-finite gradient was seen, else 0
  bool unscaled_ = false;
};

}  // namespace sublet::amp
