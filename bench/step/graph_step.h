#pragma once
// The --cuda-graph mode of `sublet bench step`: the training step, warmed up eagerly, captured
// once into a CUDA graph (runtime/step/graphed_train_step.h) and then timed as replays. Each timed
// step is one replay plus the read of its loss (as an eager step ends with loss.item()) and of its
// captured index checks.
#include <functional>

#include "bench/step/step_bench.h"

namespace sublet::bench {

// One training step on the static inputs, as GraphedTrainStep captures it: zero_grad first (so
// that the gradients live in the graph's pool), forward, loss, backward, update; returns the loss.
using GraphedStepFunction = std::function<Tensor(const Tensor& inputs, const Tensor& labels)>;

// Takes the batch (freed once the graph's static input holds it; its dtype and the options'
// memory format are the static input's). Fills result.step_ms and the peaks (reset before the
// capture, so they include the memory the graph's pool holds for its activations). Throws
// DeviceError without CUDA, ValueError for an allocator other than the caching one (raw would
// cudaFree inside the capture; async allocations would become graph memory nodes).
void time_graphed_steps(const GraphedStepFunction& step, optim::Optimizer& optimizer, Tensor inputs, Tensor labels,
                        StepBenchResult& result);

// The image models' step: cross-entropy under the recipe's autocast, the update overlapping
// backward where the recipe allows it.
void time_graphed_steps(nn::Module& model, optim::Optimizer& optimizer, amp::StepRecipe& recipe, Tensor images,
                        Tensor labels, StepBenchResult& result);

}  // namespace sublet::bench
