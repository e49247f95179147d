// Optimizer::backward_and_step (runtime/optim/optimizer.h) and the optimizer's part of an update
// overlapped with backward (Optimizer::OverlappedUpdate): what a group's update is. When each
// group goes, on which stream, and who waits for whom is the update scheduler's
// (runtime/step/scheduler.h).
#include <algorithm>

#include "runtime/allocation_scope.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/kernel_args.h"
#include "runtime/optim/optimizer.h"

namespace sublet::optim {

std::size_t Optimizer::backward_and_step(const std::function<void()>& backward) {
  if (update_scheduler_ != nullptr) return update_scheduler_->backward_and_step(*this, backward);
  backward();
  step();
  return 0;
}

Optimizer::OverlappedUpdate::OverlappedUpdate(Optimizer& optimizer) : optimizer_(optimizer) {
  optimizer_.capturing_ = true;  // the scheduler overlaps only a captured step
}

Optimizer::OverlappedUpdate::~OverlappedUpdate() { const StepFlagsReset reset{optimizer_}; }

bool Optimizer::OverlappedUpdate::can_launch(const std::vector<std::size_t>& indices) const {
  if (!optimizer_.fused_update_usable(indices)) return false;
  for (std::size_t i : indices) {
    const Tensor& p = optimizer_.params_[i];
    const Tensor g = p.grad();
    if (!g.defined() || g.sizes() != p.sizes() || !sublet::detail::same_layout(p.sizes(), g.strides(), p.strides()))
      return false;
  }
  return true;
}

void Optimizer::OverlappedUpdate::launch(const std::vector<std::size_t>& indices, const ops::Context& lane) {
  NoGradGuard no_grad;
  AllocationCategoryGuard temporaries(memory::BlockCategory::Temporary);
  optimizer_.overlap_context_ = &lane;
  optimizer_.update_params(indices);
  optimizer_.overlap_context_ = nullptr;
  launched_.insert(launched_.end(), indices.begin(), indices.end());
}

std::size_t Optimizer::OverlappedUpdate::finish() {
  const std::vector<Tensor>& params = optimizer_.params_;
  std::vector<bool> done(params.size(), false);
  for (std::size_t i : launched_) done[i] = true;
  std::vector<std::size_t> rest;
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!done[i] && params[i].grad().defined()) rest.push_back(i);
  if (!rest.empty()) {
    NoGradGuard no_grad;
    AllocationCategoryGuard temporaries(memory::BlockCategory::Temporary);
    optimizer_.update_params(rest);
  }
  const std::size_t during_backward = launched_.size();
  std::vector<std::size_t> updated = launched_;
  updated.insert(updated.end(), rest.begin(), rest.end());
  std::sort(updated.begin(), updated.end());
  optimizer_.record_captured_step(std::move(updated), /*counts_on_device=*/false);
  return during_backward;
}

}  // namespace sublet::optim
