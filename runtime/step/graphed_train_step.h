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
// device whether to skip, and the counts advance on the device only when it does not.
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

 private:
  StepFunction step_;
  optim::Optimizer& optimizer_;
  int warmup_steps_;
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
