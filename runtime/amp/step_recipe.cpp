#include "runtime/amp/step_recipe.h"

namespace sublet::amp {

StepRecipe::StepRecipe(Precision precision, Device device, GradScalerOptions scaler_options) : precision_(precision) {
  if (needs_loss_scaling(precision)) scaler_.emplace(device, scaler_options);
}

void StepRecipe::backward(const Tensor& loss) const {
  if (scaler_) {
    scaler_->scale(loss).backward();
  } else {
    loss.backward();
  }
}

optim::StepOutcome StepRecipe::step(optim::Optimizer& optimizer) {
  if (!scaler_) {
    optimizer.step();
    return optim::StepOutcome::Stepped;
  }
  const optim::StepOutcome outcome = scaler_->step(optimizer);
  scaler_->update();
  return outcome;
}

optim::StepOutcome StepRecipe::backward_and_step(const Tensor& loss, optim::Optimizer& optimizer) {
  if (scaler_) {
    backward(loss);
    return step(optimizer);
  }
  optimizer.backward_and_step([&] { loss.backward(); });
  return optim::StepOutcome::Stepped;
}

}  // namespace sublet::amp
