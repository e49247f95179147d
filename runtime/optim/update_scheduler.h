#pragma once
// Who may start an optimizer's update while backward still runs. Optimizer::backward_and_step
// hands its step to the one installed on the optimizer (step::StepScheduler, for a captured
// step: runtime/step/scheduler.h), which decides when and on which stream each group of
// parameters is updated and drives Optimizer::OverlappedUpdate; with none installed it is
// backward(), then step().
#include <cstddef>
#include <functional>

namespace sublet::optim {

class Optimizer;

class UpdateScheduler {
 public:
  virtual ~UpdateScheduler() = default;
  // backward() -- this step's gradients -- and the optimizer's update; returns how many
  // parameters' updates were launched during backward.
  virtual std::size_t backward_and_step(Optimizer& optimizer, const std::function<void()>& backward) = 0;
};

}  // namespace sublet::optim
