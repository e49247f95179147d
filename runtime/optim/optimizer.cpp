#include "runtime/optim/optimizer.h"

#include "memory/errors.h"
#include "runtime/allocation_scope.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"

namespace sublet::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  if (!(lr >= 0.0)) throw ValueError("optimizer: learning rate must be >= 0, got " + std::to_string(lr));
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].defined() || !params_[i].is_leaf() || !params_[i].requires_grad()) {
      throw ValueError("optimizer: parameter " + std::to_string(i) + " must be a leaf tensor that requires grad, got " +
                       params_[i].to_string());
    }
  }
}

void Optimizer::step() {
  NoGradGuard no_grad;
  AllocationCategoryGuard temporaries(memory::BlockCategory::Temporary);
  ++step_count_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor grad = params_[i].grad();
    if (grad.defined()) update(i, params_[i], grad);
  }
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.set_grad(Tensor());
}

Tensor Optimizer::new_state(const Tensor& like) {
  AllocationCategoryGuard category(memory::BlockCategory::OptimizerState);
  return zeros(like.sizes(), like.options());
}

}  // namespace sublet::optim
