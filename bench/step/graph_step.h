#pragma once
// The --cuda-graph mode of `sublet bench step`: the same training step (zero_grad, forward,
// cross-entropy, backward, SGD step), warmed up eagerly, captured once into a CUDA graph
// (runtime/step/graphed_train_step.h) and then timed as replays. Each timed step is one replay plus
// the read of its loss, as an eager step ends with loss.item().
#include "bench/step/step_bench.h"

namespace sublet::bench {

// Takes the batch (freed once the graph's static input holds it). Fills result.step_ms and the
// peaks (reset before the capture, so they include the memory the graph's pool holds for its
// activations). Throws DeviceError without CUDA, ValueError for
// an allocator other than the caching one (raw would cudaFree inside the capture; async
// allocations would become graph memory nodes).
void time_graphed_steps(nn::Module& model, optim::Optimizer& optimizer, amp::StepRecipe& recipe, Tensor images,
                        Tensor labels, StepBenchResult& result);

}  // namespace sublet::bench
