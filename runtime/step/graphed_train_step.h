#pragma once
// A training step replayed from a CUDA graph (runtime/step/cuda_graph.h), with static inputs:
//
//   GraphedTrainStep graphed(
//       [&](const Tensor& x, const Tensor& y) {
//         optimizer.zero_grad();                       // must come first: see below
//         Tensor loss = F::cross_entropy((*model)(x), y);
//         loss.backward();
//         optimizer.step();
//         return loss;
//       },
//       optimizer, batch_shape, labels_shape, Device::cuda(0));
//   for (...) { Tensor loss = graphed.run(images, labels); ... loss.item<float>() ... }
//
// run() copies the batch into static device tensors and performs one real training step
// (the first warm-up step returns its loss detached: read it, do not backpropagate it):
// the first `warmup_steps` eagerly (cuDNN algorithm choice, optimizer state, device scalars are
// created then), the next one by capturing the step and replaying it, every later one by
// replay alone. Each step therefore trains exactly once, and the loss sequence is the eager
// one. The returned loss is a static device tensor: read it (item()) before the next run().
// Each capture runs under a step::StepScheduler (runtime/step/scheduler.h), which overlaps the
// captured step's work on several streams: a convolution's weight gradient beside the rest of
// backward, and the update beside backward when the step calls optimizer.backward_and_step.
//
// The step function must call optimizer.zero_grad() (set_to_none) before backward: gradients
// are then allocated inside the capture, in the graph's pool, and every replay overwrites them;
// without it, backward would accumulate into gradients from before the capture on every replay.
// Before each replay the optimizer's prepare_replay() advances its step counts and writes lr
// and the counts to device memory, so schedules (set_lr between steps) and Adam's bias
// correction are followed. A loss-scaled step (amp::GradScaler: scale, backward, step, update
// inside the step function) can be graphed with the fused SGD/Adam: every replay decides on the
// device whether to skip, and the counts advance on the device only when it does not. Gradient
// clipping by the global norm (nn::utils::clip_grad_norm_tensor_) computes and applies its scale
// on the device, so a GPT step (clip, then step) is captured as it is written.
//
// Index checks. Eagerly, an embedding id or a loss target out of range throws before any kernel
// uses it (a host read-back). The capture records those checks instead
// (ops/captured_index_checks.h): every replay runs them on the device, and check_last_replay()
// throws the same error (naming the op, the position and the value) once the replay is done.
// run() and replay_static() call it for the previous replay before they start, so a bad batch
// is reported at the latest at the next step; a caller that reads the loss calls it right after
// to have the error at the step that met it. A replay that meets a bad index computes with a
// zero embedding row or a NaN loss rather than reading out of bounds, and its update has been
// applied by the time the error is thrown.
//
// Memory plans. MemoryPlan::Cached: the graph's pool follows the caching allocator's
// rules during capture. MemoryPlan::Static: the step is captured twice. The first capture (a
// probe, never replayed) records the step's requests; analysis/static_plan.h lays them out in one
// arena; the probe's graph, pool, loss and gradients are dropped; the second capture is served
// from the arena at the planned offsets. The graph then holds about the most bytes the step has
// live at once (the plan's lower bound) instead of whatever its pool's segments add up to. The
// probe's pool exists only during setup, so setup (not the replays) briefly reserves both. If
// the second capture departs from the recorded requests, the pool's usual rules serve the rest
// and memory_plan_report().abandoned says where.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ops/captured_index_checks.h"
#include "runtime/optim/optimizer.h"
#include "runtime/step/cuda_graph.h"
#include "runtime/step/memory_plan.h"
#include "runtime/tensor.h"

namespace sublet {

class GraphedTrainStep {
 public:
  using StepFunction = std::function<Tensor(const Tensor& input, const Tensor& labels)>;

  GraphedTrainStep(StepFunction step, optim::Optimizer& optimizer, const Shape& input_shape,
                   const Shape& labels_shape, Device device, int warmup_steps = 3,
                   DType input_dtype = DType::Float32, MemoryFormat input_format = MemoryFormat::Contiguous);

  // One training step on this batch (any device; shapes and dtypes as constructed).
  Tensor run(const Tensor& input, const Tensor& labels);

  // Before the capture (the step after the warm-up steps). Default: Cached.
  // `heuristic`: one of memory::static_plan_heuristics(), or empty for the smallest arena.
  void set_memory_plan(MemoryPlan plan, const std::string& heuristic = "");
  const MemoryPlanReport& memory_plan_report() const { return plan_report_; }

  bool graphed() const { return graph_.captured(); }
  std::int64_t steps() const { return steps_; }
  CudaGraph& graph() { return graph_; }
  // The static tensors the graph reads: writing them directly (on graph().stream()) and calling
  // replay_static() skips run()'s copies.
  const Tensor& static_input() const { return input_; }
  const Tensor& static_labels() const { return labels_; }
  // After the capture: one step on whatever the static tensors hold now.
  Tensor replay_static();
  // Waits for the last replay and throws the error of the first index check it failed (an
  // embedding id, a loss target out of range); nothing when there was none, or it was checked.
  void check_last_replay();
  // How many index checks the captured step runs on each replay.
  std::size_t captured_index_checks() const { return index_checks_.size(); }

 private:
  StepFunction step_;
  optim::Optimizer& optimizer_;
  int warmup_steps_;
  // Before graph_: destroyed after it, once its destructor has waited for the last replay.
  ops::CapturedIndexChecks index_checks_;
  bool replay_unchecked_ = false;
  CudaGraph graph_;
  MemoryPlanReport plan_report_;
  std::string plan_heuristic_;
  Tensor input_, labels_, loss_;
  std::int64_t steps_ = 0;

  void capture_step();
  void capture_with_static_plan();
  Tensor first_warmup_step();
};

}  // namespace sublet
