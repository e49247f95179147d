#pragma once
// The training-step benchmark behind `sublet bench step`: one model, random inputs and labels,
// SGD with momentum; W warm-up steps, then N timed steps of forward, cross-entropy, backward,
// optimizer step and zero_grad. Reports the median step time, images per second and the peak
// allocated/reserved bytes of the timed steps (peaks are reset after the warm-up), and the
// process CPU time per step.
// bench/pytorch_step.py runs the same step in PyTorch with the same flags.
#include <cstdint>
#include <ostream>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <map>

#include "core/device.h"
#include "memory/registry.h"
#include <optional>

#include "models/resnet_recompute.h"
#include "runtime/amp/precision.h"
#include "runtime/data/shape_schedule.h"
#include "runtime/amp/step_recipe.h"
#include "runtime/nn/module.h"
#include "runtime/optim/optimizer.h"
#include "runtime/step/memory_plan.h"
#include "runtime/tensor.h"

namespace sublet::bench {

struct InputShape {
  std::int64_t channels = 3, height = 32, width = 32;
  std::string str() const;  // "3x32x32"
};

// Data parallel (bench step --nproc-per-node): what runs around every backward. Made by
// StepBenchOptions::parallel for the model once it is on the device (it broadcasts rank 0's
// parameters and lays out the gradient buckets).
class StepParallel {
 public:
  virtual ~StepParallel() = default;
  virtual void prepare_backward() = 0;
  virtual void finish_backward() = 0;
};
using StepParallelFactory = std::function<std::unique_ptr<StepParallel>(nn::Module& model)>;

struct StepBenchOptions {
  std::string model = "resnet20";
  Device device = Device::cpu();
  InputShape input{};
  std::int64_t batch_size = 128;
  std::int64_t num_classes = 10;
  std::int64_t steps = 20;
  std::int64_t warmup = 3;
  double lr = 0.1;
  double momentum = 0.9;
  bool small_input_stem = false;
  std::uint64_t seed = 0;
  // GPU work: replay the step from a CUDA graph (bench/step/graph_step.h), and which allocator
  // serves the tensors (the CLI installs it with memory::replace_allocator; this is the label).
  bool cuda_graph = false;
  MemoryPlan memory_plan = MemoryPlan::Cached;  // with cuda_graph: how the graph's pool is laid out
  std::string plan_heuristic;  // with memory_plan Static: empty = the smallest arena (analysis/static_plan.h)
  std::string plan_trace_path;  // with memory_plan Static: save the probe capture's requests here
  std::string memory_budget;  // non-empty: recompute ResNet blocks to fit it (models/resnet_recompute.h)
  memory::AllocatorKind allocator = memory::AllocatorKind::Caching;
  // Wrap the timed steps (eager or graph replays) in ops::profiler_range_start/stop, so that
  // `ncu --profile-from-start off` records only them.
  bool profile_range = false;
  // Non-empty: record every allocation and free of the device's allocator during the run
  // (model build, warm-up and timed steps) and save it as a sublet-alloc-trace file, for
  // `sublet replay` and `sublet bench alloc --history`.
  std::string alloc_trace_path;
  // Mark every module's forward and backward as NVTX ranges (runtime/nn/module_ranges.h).
  bool nvtx = false;
  // --precision: fp32, or autocast to bf16/fp16 with float32 master weights (fp16 with loss
  // scaling), as runtime/amp/step_recipe.h; --channels-last: the model's 4-d parameters and the
  // batch in MemoryFormat::ChannelsLast (NHWC), as PyTorch's model.to(memory_format=...).
  amp::Precision precision = amp::Precision::Fp32;
  MemoryFormat memory_format = MemoryFormat::Contiguous;
  // Set: every step is a data-parallel step (eager only).
  StepParallelFactory parallel;
  // GPT models (bench/step/gpt_step_bench.cpp): random token windows of seq_len (0: the model's
  // context) over a vocabulary of vocab_size; input and num_classes do not apply.
  std::int64_t seq_len = 0;
  std::int64_t vocab_size = 50304;
  std::int64_t block_size = 0;  // GPT models: positions with embeddings (0: the model's own context)
  // Set: step i trains on the schedule's i-th shape (warm-up steps first), built afresh each step,
  // instead of batch_size x input or seq_len; batch_size, input and seq_len do not apply then.
  std::shared_ptr<const data::ShapeSchedule> schedule;
  // Keep the allocator's peaks and counters from its creation instead of resetting them after the
  // warm-up (the allocator-settings sweep: the whole run, as a fresh PyTorch process reports it).
  bool memory_stats_from_start = false;
};

struct StepBenchResult {
  StepBenchOptions options;
  std::vector<double> step_ms;  // each timed step, in order
  double ms_per_step = 0;       // median of step_ms
  // Median process CPU time per step (all threads). On a machine shared with other jobs the
  // wall time depends on how much of the cores the run got; CPU time much less so (with
  // OMP_WAIT_POLICY=passive: spinning threads count as busy otherwise).
  double cpu_ms_per_step = 0;
  double img_per_s = 0;         // batch_size / median step time
  std::size_t peak_allocated_bytes = 0;
  std::size_t peak_reserved_bytes = 0;
  int threads = 1;              // OpenMP threads the CPU kernels may use
  double device_allocs_per_step = 0;  // backend (driver) allocation calls per timed step
  // With a CUDA graph: the peaks above are the captured step's (allocated: its live peak during
  // the capture; reserved: what the replays hold), and setup_peak_reserved_bytes is the most
  // reserved from the capture on (a static plan's probe capture included).
  std::size_t setup_peak_reserved_bytes = 0;
  MemoryPlanReport plan_report;
  std::optional<models::RecomputeReport> recompute;  // with a memory budget
  // GPT models: training tokens per second, the model FLOPs per token (nanoGPT's estimate:
  // 6 N + 12 layers x width x seq_len, N without the position embeddings) and the model FLOPs
  // utilisation against a dense bf16 peak of 989 TFLOP/s (H100/H200 SXM; 0 on the CPU).
  bool language_model = false;
  std::int64_t seq_len = 0;
  double tokens_per_s = 0;
  double flops_per_token = 0;
  double mfu = 0;
  // Wall time of the timed steps over the samples they trained on (tokens for GPT models, images
  // otherwise): with a shape schedule steps differ, so this, not the median step, compares runs.
  double us_per_sample = 0;
  std::int64_t timed_samples = 0;
  // The allocator's memory_stats() after the timed steps: peaks and counters cover the timed
  // steps (both are reset after the warm-up), or the whole run with memory_stats_from_start.
  std::map<std::string, std::int64_t> memory_stats;
};

// One training step: forward and cross-entropy (under the recipe's autocast), backward (of the
// scaled loss for fp16), optimizer step (through the loss scaler for fp16), zero_grad (gradients
// set to none, freeing them). Returns the loss as a host float, which on a GPU also waits for
// the step's kernels.
// With `parallel`, backward runs between its prepare_backward and finish_backward.
float training_step(nn::Module& model, optim::Optimizer& optimizer, const Tensor& images, const Tensor& labels,
                    StepParallel* parallel = nullptr, amp::StepRecipe* recipe = nullptr);

// Throws ValueError for non-positive sizes or counts and for an unknown model (listing the
// known ones); DeviceError when the device is not usable. `progress` (if given) gets one line
// per phase.
StepBenchResult run_step_bench(const StepBenchOptions& options, std::ostream* progress = nullptr);
// The GPT step (bench/step/gpt_step_bench.cpp): what run_step_bench runs for a GPT model.
StepBenchResult run_gpt_step_bench(const StepBenchOptions& options, std::ostream* progress = nullptr);

// Runs options.warmup steps, resets the peaks and the accumulated counters (unless
// options.memory_stats_from_start), then times
// options.steps steps, filling the result's times, peaks, driver calls per step, time per sample
// and memory_stats. `step(i)` runs step i (0-based, warm-up steps included), which trains on
// `samples(i)` samples.
void time_eager_steps(const std::function<void(std::int64_t)>& step, const std::function<std::int64_t(std::int64_t)>& samples,
                      const StepBenchOptions& options, StepBenchResult& result);

double median(std::vector<double> values);

}  // namespace sublet::bench
