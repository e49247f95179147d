#include "runtime/step/scheduler.h"

#include <algorithm>

#include "runtime/step/update_groups.h"

namespace sublet::step {

// One backward_and_step in progress: its groups, the optimizer's part of the update, and the
// update lane (its workspaces belong to the capture's stream, held until the lane is joined).
struct StepScheduler::OverlappedStep {
  ops::Context ctx;  // the capture's stream
  UpdateGroups groups;
  optim::Optimizer::OverlappedUpdate& update;
  ops::WorkspaceHold hold;
  ops::Context lane;
  bool forked = false;
};

StepScheduler::StepScheduler(StepSchedulerOptions options) : options_(options) {}

StepScheduler::~StepScheduler() = default;

bool StepScheduler::place_passes(const ops::Context& ctx, autograd::BackwardPasses& passes) {
  if (!passes.main || !passes.side || !ops::detail::overlaps_streams(ctx)) {
    autograd::run_in_order(ctx, passes);
  } else if (passes.side_writes_only_leaves) {  // rule 1
    run_beside(ctx, passes);
  } else {
    ops::run_concurrently(ctx, passes.main, passes.side);
  }
  return true;
}

void StepScheduler::run_beside(const ops::Context& ctx, autograd::BackwardPasses& passes) {
  const ops::SideLane lane = use_odd_lane_ ? ops::SideLane::BesideOdd : ops::SideLane::BesideEven;
  use_odd_lane_ = !use_odd_lane_;
  // Rule 5: the kept tensors and the side's workspaces (held on ctx.stream) live until the join.
  PendingSideWork work{ctx, lane, nullptr, std::make_unique<ops::WorkspaceHold>(), std::move(passes.keep)};
  work.workspaces->stream = ctx.stream;
  ops::Context side_ctx = ctx;
  side_ctx.workspace_hold = work.workspaces.get();
  side_ctx.stream = ops::detail::fork_stream(ctx, lane);
  work.lane_stream = side_ctx.stream;
  try {
    passes.side(static_cast<const ops::Context&>(side_ctx));
    passes.main(ctx);
  } catch (...) {
    ops::detail::join_stream(ctx, lane);  // the capture fails anyway; keep the streams ordered
    join_side_work();
    throw;
  }
  join_side_work();  // the previous request's side work, on the other lane: behind this main work
  pending_.push_back(std::move(work));
}

void StepScheduler::join_side_work() {
  for (PendingSideWork& work : pending_) ops::detail::join_stream(work.ctx, work.lane);
  pending_.clear();  // the kept tensors and workspaces go back after the joins, on the joining streams
}

std::vector<StreamHandle> StepScheduler::pending_side_streams() const {
  std::vector<StreamHandle> out;
  for (const PendingSideWork& work : pending_) out.push_back(work.lane_stream);
  return out;
}

// Rule 2: a gradient still being written beside may be stored, not read.
void StepScheduler::about_to_touch_leaf_gradient(const TensorImpl&) {
  if (!pending_.empty()) join_side_work();
}

// Rule 4, for the side work: whoever reads the gradients next (a capture's end included) finds
// every stream caught up.
void StepScheduler::backward_finished() {
  if (!pending_.empty()) join_side_work();
}

void StepScheduler::leaf_gradient_final(const TensorImpl& leaf) {
  if (step_ != nullptr && step_->groups.add(leaf)) launch_update_group();
}

void StepScheduler::launch_update_group() {
  OverlappedStep& step = *step_;
  if (!step.update.can_launch(step.groups.open())) return;  // left to the end
  // Rule 3: the lane waits for backward so far, and for side work still writing gradients.
  for (StreamHandle side : pending_side_streams()) {
    ops::Context from_side = step.ctx;
    from_side.stream = side;
    ops::detail::fork_stream(from_side, ops::SideLane::OptimizerUpdate);
  }
  step.lane.stream = ops::detail::fork_stream(step.ctx, ops::SideLane::OptimizerUpdate);
  step.forked = true;
  step.update.launch(step.groups.open(), step.lane);
  step.groups.launched();
}

std::size_t StepScheduler::backward_and_step(optim::Optimizer& optimizer, const std::function<void()>& backward) {
  const std::vector<Tensor>& params = optimizer.params();
  const ops::Context ctx =
      params.empty() ? ops::Context::for_device(Device::cpu()) : ops::Context::for_device(params[0].device());
  const std::vector<autograd::BackwardObserver*>& observers = autograd::backward_observers();
  const bool watched_by_another =
      std::any_of(observers.begin(), observers.end(), [this](const autograd::BackwardObserver* o) { return o != this; });
  if (params.empty() || watched_by_another || !ops::detail::overlaps_streams(ctx) || step_ != nullptr) {
    backward();
    optimizer.step();
    return 0;
  }
  optim::Optimizer::OverlappedUpdate update(optimizer);
  OverlappedStep step{ctx, UpdateGroups(params, options_.update_groups), update, ops::WorkspaceHold{ctx.stream, {}}, ctx};
  step.lane.workspace_hold = &step.hold;
  struct Active {
    StepScheduler& scheduler;
    ~Active() { scheduler.step_ = nullptr; }
  };
  std::size_t during_backward = 0;
  try {
    {
      step_ = &step;
      const Active active{*this};
      backward();
    }
    // What is left: the last group, groups the lane could not take, and parameters whose
    // gradient predates this backward (step() would update them too).
    during_backward = update.finish();
  } catch (...) {
    if (step.forked) ops::detail::join_stream(ctx, ops::SideLane::OptimizerUpdate);  // the capture fails anyway
    throw;
  }
  if (step.forked) ops::detail::join_stream(ctx, ops::SideLane::OptimizerUpdate);  // rule 4, the update lane
  return during_backward;
}  // the held workspaces go back here (step.hold), on ctx.stream, after the join

StepSchedulerScope::StepSchedulerScope(StepScheduler& scheduler, optim::Optimizer* optimizer)
    : scheduler_(scheduler), optimizer_(optimizer), observing_(scheduler) {
  if (optimizer_ != nullptr) previous_update_scheduler_ = optimizer_->set_update_scheduler(&scheduler_);
}

StepSchedulerScope::~StepSchedulerScope() {
  if (optimizer_ != nullptr) optimizer_->set_update_scheduler(previous_update_scheduler_);
  try {
    if (scheduler_.side_work_pending()) scheduler_.join_side_work();  // rule 4, the scope's end
  } catch (...) {
  }
}

}  // namespace sublet::step
