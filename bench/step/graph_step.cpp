#include "bench/step/graph_step.h"

#include <algorithm>
#include <chrono>

#include "analysis/replay.h"
#include "core/errors.h"
#include "memory/registry.h"
#include "ops/profiler_range.h"
#include "runtime/nn/functional.h"
#ifdef SUBLET_HAVE_CUDA
#include "runtime/step/graphed_train_step.h"
#endif

namespace sublet::bench {

void time_graphed_steps(const GraphedStepFunction& step, optim::Optimizer& optimizer, Tensor inputs, Tensor labels,
                        StepBenchResult& result) {
  const StepBenchOptions& options = result.options;
  if (!options.device.is_cuda()) throw DeviceError("bench step --cuda-graph: needs --device cuda");
  if (options.allocator != memory::AllocatorKind::Caching)
    throw ValueError(std::string("bench step --cuda-graph: needs the caching allocator, got ") +
                     memory::allocator_kind_name(options.allocator) +
                     " (raw frees with cudaFree inside the capture; async allocations would be captured)");
#ifdef SUBLET_HAVE_CUDA
  const auto warmup = std::max<std::int64_t>(options.warmup, 1);
  GraphedTrainStep graphed(step, optimizer, inputs.sizes(), labels.sizes(), options.device, static_cast<int>(warmup),
                           inputs.dtype(), options.memory_format);
  graphed.set_memory_plan(options.memory_plan, options.plan_heuristic);
  for (std::int64_t i = 0; i < warmup; ++i) graphed.run(inputs, labels).item<float>();
  graphed.graph().synchronize();
  // The replays read the batch from the graph's static input, which holds it now: the source
  // copy goes, as in a training loop that loads each batch straight into the static input
  // (otherwise the graphed step's peak counts the batch twice).
  inputs = Tensor();
  labels = Tensor();
  reset_peak_memory_stats(options.device);
  graphed.replay_static().item<float>();  // capture + first replay (untimed)
  graphed.check_last_replay();
  // Replays make no allocator call: the step's live peak is the capture's, and what the replays
  // hold is measured over them.
  result.peak_allocated_bytes = max_memory_allocated(options.device);
  result.setup_peak_reserved_bytes = max_memory_reserved(options.device);
  result.plan_report = graphed.memory_plan_report();
  if (!options.plan_trace_path.empty()) memory::save_trace(options.plan_trace_path, result.plan_report.recorded);
  reset_peak_memory_stats(options.device);
  using Clock = std::chrono::steady_clock;
  const auto timed_start = memory::allocator_for(options.device).stats();
  if (options.profile_range) ops::profiler_range_start();
  for (std::int64_t i = 0; i < options.steps; ++i) {
    const auto start = Clock::now();
    graphed.replay_static().item<float>();  // waits for the replay
    graphed.check_last_replay();
    result.step_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  if (options.profile_range) ops::profiler_range_stop();
  const auto after = memory::allocator_for(options.device).stats();
  result.device_allocs_per_step =
      static_cast<double>(after.num_device_alloc - timed_start.num_device_alloc) / static_cast<double>(options.steps);
  result.peak_reserved_bytes = max_memory_reserved(options.device);
#else
  (void)step, (void)optimizer, (void)inputs, (void)labels;
  throw DeviceError("bench step --cuda-graph: this sublet was built without CUDA");
#endif
}

void time_graphed_steps(nn::Module& model, optim::Optimizer& optimizer, amp::StepRecipe& recipe, Tensor images,
                        Tensor labels, StepBenchResult& result) {
  time_graphed_steps(
      [&](const Tensor& x, const Tensor& y) {
        optimizer.zero_grad();  // first, so the gradients live in the graph's pool
        Tensor loss = recipe.forward([&] { return nn::functional::cross_entropy(model(x), y); });
        // The update overlaps backward (not fp16: there the fused update skips on the device).
        recipe.backward_and_step(loss, optimizer);
        return loss;
      },
      optimizer, std::move(images), std::move(labels), result);
}

}  // namespace sublet::bench
