#pragma once
// The step scheduler: where the device work of a captured training step runs, and who waits
// for whom. One object owns the overlap of a captured step:
//
//  - a backward's independent passes (a convolution's input and weight gradients,
//    autograd::BackwardPasses): one after the other, side by side and joined at once
//    (ops::run_concurrently), or with the side pass left running past its node;
//  - the side work left running: its lanes, what it keeps alive, and when it is joined;
//  - the optimizer's update started group by group during backward (Optimizer::backward_and_step).
//
//   step::StepScheduler scheduler;
//   graph.capture([&] {
//     step::StepSchedulerScope scope(scheduler, &optimizer);  // inside the capture: its joins are captured
//     ...forward, backward, optimizer.backward_and_step(...)...
//   });
//
// GraphedTrainStep installs one for each capture (runtime/step/graphed_train_step.h). Outside a
// scope, and inside one while the stream is not captured (eager steps, the CPU, the diagnostic
// TuningOptions::stream_overlap off: ops::detail::overlaps_streams), every request runs in
// order on the caller's stream: eager launches would pay host time for the forks and joins.
//
// Side work left running, in a captured backward:
//
//   conv k:    lane A: fork, weight gradient k     main: input gradient k
//              (nothing waits for lane A here)
//   ...        main: batch norm's backward, ...    (beside lane A)
//   conv k+1:  lane B: fork, weight gradient k+1   main: input gradient k+1, then wait for lane A
//
// Two lanes (ops::SideLane::BesideEven/BesideOdd) alternate, so at most one request's side work
// is pending at a time and it is joined one request later.
//
// The waiting rules, each written once below:
//  1. Side work may run past its node only if everything it writes is a leaf's gradient
//     (BackwardPasses::side_writes_only_leaves); otherwise the passes are joined at once.
//  2. Before the engine launches work on a leaf's gradient (adding into it, a cast, a copy to the
//     leaf's layout) the lanes with pending side work are joined (about_to_touch_leaf_gradient).
//  3. An update group's lane waits for the capture stream and for every lane with pending side
//     work when it forks.
//  4. At the end of every backward the lanes with pending side work are joined; the update lane
//     is joined after the step's last update; the scope's end joins whatever is still pending,
//     on the way out of an exception too.
//  5. What a pass reads or writes (BackwardPasses::keep) and its workspaces stay alive, its
//     workspaces held on the capture stream (ops::WorkspaceHold), until its lane is joined.
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "ops/concurrent.h"
#include "runtime/autograd/backward_observer.h"
#include "runtime/optim/optimizer.h"
#include "runtime/optim/update_scheduler.h"

namespace sublet::step {

struct StepSchedulerOptions {
  // An optimizer update overlapped with backward goes out in this many groups of parameter
  // bytes: the fastest captured ResNet-18 step of 4, 8 and 16.
  std::size_t update_groups = 8;
};

class StepScheduler final : public autograd::BackwardObserver, public optim::UpdateScheduler {
 public:
  explicit StepScheduler(StepSchedulerOptions options = {});
  ~StepScheduler() override;
  StepScheduler(const StepScheduler&) = delete;
  StepScheduler& operator=(const StepScheduler&) = delete;

  // A backward's passes, by rules 1 and 5 (BackwardContext::run_passes reaches it here).
  bool place_passes(const ops::Context& ctx, autograd::BackwardPasses& passes) override;
  // Rule 2.
  void about_to_touch_leaf_gradient(const TensorImpl& leaf) override;
  // Adds the leaf to the open update group while backward_and_step runs; launches a ready group.
  void leaf_gradient_final(const TensorImpl& leaf) override;
  // Rule 4.
  void backward_finished() override;
  // Optimizer::backward_and_step while this scheduler is installed for the optimizer: the update
  // in groups on the update lane during backward (rule 3), the rest after it. Backward, then
  // step(), when the stream is not captured, or when another observer watches the gradients
  // (data parallel's all-reduce must come before any update).
  std::size_t backward_and_step(optim::Optimizer& optimizer, const std::function<void()>& backward) override;

  bool side_work_pending() const { return !pending_.empty(); }
  // The lanes with pending side work.
  std::vector<StreamHandle> pending_side_streams() const;
  // Makes each stream that started side work wait for it, then drops what that work kept.
  void join_side_work();

 private:
  struct PendingSideWork {
    ops::Context ctx;  // the stream that forked it, which joins it
    ops::SideLane lane;
    StreamHandle lane_stream;
    std::unique_ptr<ops::WorkspaceHold> workspaces;  // on ctx.stream, released after the join
    std::vector<Tensor> keep;
  };
  struct OverlappedStep;

  void run_beside(const ops::Context& ctx, autograd::BackwardPasses& passes);
  void launch_update_group();

  StepSchedulerOptions options_;
  std::vector<PendingSideWork> pending_;
  bool use_odd_lane_ = false;
  OverlappedStep* step_ = nullptr;  // while backward_and_step's backward runs
};

// Installs a scheduler for one captured step: as the backward observer of this thread, and as
// `optimizer`'s update scheduler (when given). Its end joins every lane still pending into the
// capture stream, on the way out of an exception too (a join's error is dropped there: a failed
// join fails the capture), and restores what was installed before.
class StepSchedulerScope {
 public:
  explicit StepSchedulerScope(StepScheduler& scheduler, optim::Optimizer* optimizer = nullptr);
  ~StepSchedulerScope();
  StepSchedulerScope(const StepSchedulerScope&) = delete;
  StepSchedulerScope& operator=(const StepSchedulerScope&) = delete;

 private:
  StepScheduler& scheduler_;
  optim::Optimizer* optimizer_;
  optim::UpdateScheduler* previous_update_scheduler_ = nullptr;
  autograd::BackwardObserverGuard observing_;
};

}  // namespace sublet::step
