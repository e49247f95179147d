// Optimizer::backward_and_step (runtime/optim/optimizer.h): the update started group by group
// while a captured backward is still producing gradients.
//
// Backward reports each parameter once its gradient is final (autograd::BackwardObserver).
// The reported parameters collect in a group; once the group holds an eighth of all parameter
// bytes, a fork of the capture's stream onto the update lane (ops/concurrent.h) launches its
// fused update there, behind everything backward has enqueued so far. The groups queue one
// behind another on that lane; the last parameters (the model's first layers, reported last)
// are updated on the capture's stream after backward, which then waits for the lane.
// Eighths: the fastest captured ResNet-18 step of quarters, eighths and sixteenths. Smaller
// groups leave less of the update after backward; more of them add launches and graph edges.
#include <algorithm>
#include <unordered_map>

#include "ops/concurrent.h"
#include "runtime/allocation_scope.h"
#include "runtime/autograd/backward_observer.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/kernel_args.h"
#include "runtime/optim/optimizer.h"
#include "runtime/side_work.h"

namespace sublet::optim {

namespace {

constexpr std::size_t kGroupsPerStep = 8;

// Whether the update can read these gradients where they are. A gradient in another layout than
// its parameter's is copied by the fused path on the capture's stream, and that copy would go
// back to the allocator while the lane may still read it: such groups wait for the final update.
bool gradients_in_parameter_layout(const std::vector<Tensor>& params, const std::vector<std::size_t>& indices) {
  for (std::size_t i : indices) {
    const Tensor& p = params[i];
    const Tensor g = p.grad();
    if (!g.defined() || g.sizes() != p.sizes() || !sublet::detail::same_layout(p.sizes(), g.strides(), p.strides()))
      return false;
  }
  return true;
}

// Hands each final leaf gradient to `on_final` while installed.
template <typename OnFinal>
class LeafGradientWatch final : public autograd::BackwardObserver {
 public:
  explicit LeafGradientWatch(OnFinal& on_final) : on_final_(on_final) {}
  void leaf_gradient_final(const TensorImpl& leaf) override { on_final_(leaf); }

 private:
  OnFinal& on_final_;
};

}  // namespace

std::size_t Optimizer::backward_and_step(const std::function<void()>& backward) {
  const ops::Context ctx =
      params_.empty() ? ops::Context::for_device(Device::cpu()) : ops::Context::for_device(params_[0].device());
  if (params_.empty() || !autograd::backward_observers().empty() ||
      !ops::detail::overlaps_streams(ctx)) {
    backward();
    step();
    return 0;
  }
  std::unordered_map<const TensorImpl*, std::size_t> index_of;
  std::size_t total_bytes = 0;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    index_of.emplace(params_[i].unsafe_impl(), i);
    total_bytes += params_[i].nbytes();
  }
  const std::size_t group_bytes = std::max<std::size_t>(total_bytes / kGroupsPerStep, 1);

  capturing_ = true;  // overlaps_streams: ctx.stream captures
  const StepFlagsReset reset{*this};
  // The lane's workspaces (the update's parameter table) belong to the capture's stream and are
  // held until the lane is joined back into it (ops::WorkspaceHold).
  ops::WorkspaceHold hold{ctx.stream, {}};
  ops::Context lane = ctx;
  lane.workspace_hold = &hold;
  std::vector<std::size_t> updated, group;
  std::size_t group_pending_bytes = 0;
  bool forked = false;
  std::size_t during_backward = 0;

  const auto launch_group = [&] {
    if (!fused_update_usable(group) || !gradients_in_parameter_layout(params_, group)) return;  // left to the end
    NoGradGuard no_grad;
    AllocationCategoryGuard temporaries(memory::BlockCategory::Temporary);
    // The lane waits for backward so far, and for side work still writing gradients
    // (runtime/side_work.h: a convolution's weight gradient runs on past its node).
    for (StreamHandle side : sublet::detail::pending_side_streams()) {
      ops::Context from_side = ctx;
      from_side.stream = side;
      ops::detail::fork_stream(from_side, ops::SideLane::OptimizerUpdate);
    }
    lane.stream = ops::detail::fork_stream(ctx, ops::SideLane::OptimizerUpdate);
    forked = true;
    overlap_context_ = &lane;
    update_params(group);
    overlap_context_ = nullptr;
    updated.insert(updated.end(), group.begin(), group.end());
    group.clear();
    group_pending_bytes = 0;
  };
  try {
    {
      const auto on_final = [&](const TensorImpl& leaf) {
        const auto it = index_of.find(&leaf);
        if (it == index_of.end()) return;  // a leaf that is not one of this optimizer's parameters
        group.push_back(it->second);
        group_pending_bytes += params_[it->second].nbytes();
        if (group_pending_bytes >= group_bytes) launch_group();
      };
      LeafGradientWatch<const decltype(on_final)> watch(on_final);
      const autograd::BackwardObserverGuard watching(watch);
      backward();
    }
    // What is left: the last group, groups the lane could not take, and parameters whose
    // gradient predates this backward (step() would update them too).
    std::vector<bool> done(params_.size(), false);
    for (std::size_t i : updated) done[i] = true;
    std::vector<std::size_t> rest;
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (!done[i] && params_[i].grad().defined()) rest.push_back(i);
    if (!rest.empty()) {
      NoGradGuard no_grad;
      AllocationCategoryGuard temporaries(memory::BlockCategory::Temporary);
      update_params(rest);
    }
    during_backward = updated.size();
    updated.insert(updated.end(), rest.begin(), rest.end());
  } catch (...) {
    if (forked) ops::detail::join_stream(ctx, ops::SideLane::OptimizerUpdate);  // the capture fails anyway
    throw;
  }
  if (forked) ops::detail::join_stream(ctx, ops::SideLane::OptimizerUpdate);
  std::sort(updated.begin(), updated.end());
  record_captured_step(std::move(updated), /*counts_on_device=*/false);
  return during_backward;
}  // the held workspaces go back here, on ctx.stream, after the join

}  // namespace sublet::optim
