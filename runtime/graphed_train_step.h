#pragma once
// A training step replayed from a CUDA graph (runtime/cuda/cuda_graph.h), with static inputs:
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
// run() copies the batch into static device tensors and performs one real training step:
// the first `warmup_steps` eagerly (cuDNN algorithm choice, optimizer state, device scalars are
// created then), the next one by capturing the step and replaying it, every later one by
// replay alone. Each step therefore trains exactly once, and the loss sequence is the eager
// one. The returned loss is a static device tensor: read it (item()) before the next run().
//
// The step function must call optimizer.zero_grad() (set_to_none) before backward: gradients
// are then allocated inside the capture, in the graph's pool, and every replay overwrites them;
// without it, backward would accumulate into gradients from before the capture on every replay.
// Before each replay the optimizer's prepare_replay() advances its step counts and writes lr
// and the counts to device memory, so schedules (set_lr between steps) and Adam's bias
// correction are followed.
#include <cstdint>
#include <functional>
#include <memory>

#include "runtime/cuda/cuda_graph.h"
#include "runtime/optim/optimizer.h"
#include "runtime/tensor.h"

namespace sublet {

class GraphedTrainStep {
 public:
  using StepFunction = std::function<Tensor(const Tensor& input, const Tensor& labels)>;

  GraphedTrainStep(StepFunction step, optim::Optimizer& optimizer, const Shape& input_shape,
                   const Shape& labels_shape, Device device, int warmup_steps = 3,
                   DType input_dtype = DType::Float32);

  // One training step on this batch (any device; shapes and dtypes as constructed).
  Tensor run(const Tensor& input, const Tensor& labels);

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
  Tensor input_, labels_, loss_;
  std::int64_t steps_ = 0;
};

}  // namespace sublet
