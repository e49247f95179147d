#pragma once
// Learning-rate schedules. Each is a pure function of the epoch (or step) count from the
// optimizer's learning rate at construction (base_lr); step() advances the count and sets the
// optimizer's lr, like torch.optim.lr_scheduler. Call step() after optimizer.step().
#include <cstdint>
#include <memory>

#include "runtime/optim/optimizer.h"

namespace sublet::optim {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer) : optimizer_(optimizer), base_lr_(optimizer.lr()) {}
  virtual ~LRScheduler() = default;
  void step();
  std::int64_t last_epoch() const { return epoch_; }
  double base_lr() const { return base_lr_; }
  // The learning rate at `epoch` (0 = the base).
  virtual double lr_at(std::int64_t epoch) const = 0;

 protected:
  // For schedules whose epoch 0 is not the base (warm-up): set the optimizer's lr at once.
  void apply_current() { optimizer_.set_lr(lr_at(epoch_)); }

 private:
  Optimizer& optimizer_;
  double base_lr_;
  std::int64_t epoch_ = 0;
};

// base_lr * gamma ^ floor(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);
  double lr_at(std::int64_t epoch) const override;

 private:
  std::int64_t step_size_;
  double gamma_;
};

// eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / t_max)) / 2, held at eta_min after t_max.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, double eta_min = 0.0);
  double lr_at(std::int64_t epoch) const override;

 private:
  std::int64_t t_max_;
  double eta_min_;
};

// Linear warm-up from start_factor * base_lr to base_lr over warmup_steps, then `after`
// (evaluated from its own epoch 0 with the same base; do not step it yourself) or a constant
// base_lr when none. The optimizer's lr is start_factor * base_lr right after construction.
class LinearWarmupLR : public LRScheduler {
 public:
  LinearWarmupLR(Optimizer& optimizer, std::int64_t warmup_steps, double start_factor = 0.0,
                 std::unique_ptr<LRScheduler> after = nullptr);
  double lr_at(std::int64_t epoch) const override;

 private:
  std::int64_t warmup_steps_;
  double start_factor_;
  std::unique_ptr<LRScheduler> after_;
};

}  // namespace sublet::optim
