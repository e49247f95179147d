#include "runtime/optim/lr_scheduler.h"

#include <cmath>
#include <numbers>

#include "core/errors.h"

namespace sublet::optim {

void LRScheduler::step() {
  ++epoch_;
  optimizer_.set_lr(lr_at(epoch_));
}

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0) throw ValueError("StepLR: step_size must be positive, got " + std::to_string(step_size));
}

double StepLR::lr_at(std::int64_t epoch) const {
  return base_lr() * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  if (t_max <= 0) throw ValueError("CosineAnnealingLR: t_max must be positive, got " + std::to_string(t_max));
}

double CosineAnnealingLR::lr_at(std::int64_t epoch) const {
  const double progress = static_cast<double>(std::min(epoch, t_max_)) / static_cast<double>(t_max_);
  return eta_min_ + (base_lr() - eta_min_) * (1.0 + std::cos(std::numbers::pi * progress)) / 2.0;
}

LinearWarmupLR::LinearWarmupLR(Optimizer& optimizer, std::int64_t warmup_steps, double start_factor,
                               std::unique_ptr<LRScheduler> after)
    : LRScheduler(optimizer), warmup_steps_(warmup_steps), start_factor_(start_factor), after_(std::move(after)) {
  if (warmup_steps < 0 || start_factor < 0.0 || start_factor > 1.0) {
    throw ValueError("LinearWarmupLR: need warmup_steps >= 0 and start_factor in [0, 1], got " +
                     std::to_string(warmup_steps) + " and " + std::to_string(start_factor));
  }
  apply_current();
}

double LinearWarmupLR::lr_at(std::int64_t epoch) const {
  if (epoch < warmup_steps_) {
    const double fraction = static_cast<double>(epoch) / static_cast<double>(warmup_steps_);
    return base_lr() * (start_factor_ + (1.0 - start_factor_) * fraction);
  }
  return after_ ? after_->lr_at(epoch - warmup_steps_) : base_lr();
}

}  // namespace sublet::optim
