#pragma once
// How one training step runs in a precision (`--precision fp32|bf16|fp16`), shared by
// `sublet train`, `sublet bench step` and `sublet profile`, as PyTorch's mixed-precision recipe:
//
//   amp::StepRecipe recipe(Precision::Fp16, device);
//   Tensor loss = recipe.forward([&] { return F::cross_entropy(model(x), y); });  // under autocast
//   recipe.backward(loss);       // fp16: (loss x scale).backward(), so small gradients survive
//   recipe.step(optimizer);      // fp16: unscale, skip on inf/NaN, update the scale; else step()
//
// or, for the last two, recipe.backward_and_step(loss, optimizer): the same step, with the
// update overlapping backward in a captured CUDA graph (Optimizer::backward_and_step) where the
// recipe allows it (not fp16: the inf/NaN check needs every gradient before any update).
//
// fp32 is the plain step. bf16 runs the forward under AutocastGuard(BFloat16) and needs no loss
// scaling (bfloat16 has float32's exponent range). fp16 runs it under AutocastGuard(Float16)
// with an amp::GradScaler (PyTorch's defaults). Parameters, gradients and optimizer state stay
// float32 in every recipe.
#include <optional>
#include <utility>

#include "core/device.h"
#include "runtime/amp/grad_scaler.h"
#include "runtime/amp/precision.h"
#include "runtime/autocast.h"
#include "runtime/optim/optimizer.h"
#include "runtime/tensor.h"

namespace sublet::amp {

// `f()` under the autocast of `precision` (nothing for fp32); returns what it returns.
template <class F>
decltype(auto) with_autocast(Precision precision, F&& f) {
  std::optional<AutocastGuard> autocast;
  if (const auto dtype = autocast_dtype_of(precision)) autocast.emplace(*dtype);
  return std::forward<F>(f)();
}

class StepRecipe {
 public:
  explicit StepRecipe(Precision precision = Precision::Fp32, Device device = Device::cpu(),
                      GradScalerOptions scaler_options = {});

  Precision precision() const { return precision_; }
  // The loss scaler of an fp16 recipe; nullptr otherwise.
  GradScaler* scaler() { return scaler_ ? &*scaler_ : nullptr; }
  const GradScaler* scaler() const { return scaler_ ? &*scaler_ : nullptr; }

  // `forward()` (the model and the loss, or anything that runs the model: a memory-budget fit)
  // under autocast in the recipe's 16-bit type; returns what it returns.
  template <class Forward>
  decltype(auto) forward(Forward&& forward) const {
    return with_autocast(precision_, std::forward<Forward>(forward));
  }
  void backward(const Tensor& loss) const;
  // optimizer.step(); for fp16 through the scaler (which skips the step on an inf/NaN gradient,
  // on the device with the fused optimizers) and then the scale's update.
  optim::StepOutcome step(optim::Optimizer& optimizer);
  // backward(loss), then step(optimizer); without loss scaling through
  // Optimizer::backward_and_step, which overlaps the update with backward while capturing.
  optim::StepOutcome backward_and_step(const Tensor& loss, optim::Optimizer& optimizer);

 private:
  Precision precision_;
  std::optional<GradScaler> scaler_;
};

}  // namespace sublet::amp
