#pragma once
// Optimizers update parameters in place under NoGradGuard. Their state (momentum buffers, Adam
// moments) is allocated lazily on the first step with the OptimizerState category, so memory
// snapshots show it apart from parameters and gradients; temporaries of a step are tagged
// Temporary. zero_grad() drops gradients (set_to_none), which frees their memory.
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace sublet::optim {

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Parameters without a gradient are skipped.
  void step();
  void zero_grad();
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  const std::vector<Tensor>& params() const { return params_; }
  std::int64_t step_count() const { return step_count_; }

 protected:
  // Updates params_[index] given its gradient; called with grad mode off.
  virtual void update(std::size_t index, Tensor& param, const Tensor& grad) = 0;
  // A zero tensor like `like`, tagged OptimizerState.
  static Tensor new_state(const Tensor& like);

 private:
  std::vector<Tensor> params_;
  double lr_;
  std::int64_t step_count_ = 0;
};

}  // namespace sublet::optim
