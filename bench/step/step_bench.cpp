#include "bench/step/step_bench.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <tuple>
#include <utility>

#include "core/errors.h"
#include "memory/history.h"
#include "memory/registry.h"
#include "analysis/replay.h"
#include "models/registry.h"
#include "ops/profiler_range.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/module_ranges.h"
#include "runtime/nn/parameter_format.h"
#include "runtime/optim/sgd.h"
#include "bench/step/graph_step.h"

namespace sublet::bench {

std::string InputShape::str() const {
  return std::to_string(channels) + "x" + std::to_string(height) + "x" + std::to_string(width);
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

float training_step(nn::Module& model, optim::Optimizer& optimizer, const Tensor& images, const Tensor& labels,
                    StepParallel* parallel, amp::StepRecipe* recipe) {
  amp::StepRecipe fp32;
  amp::StepRecipe& r = recipe ? *recipe : fp32;
  float loss_value = 0;
  {
    const Tensor loss = r.forward([&] { return nn::functional::cross_entropy(model(images), labels); });
    if (parallel) parallel->prepare_backward();
    r.backward(loss);
    if (parallel) parallel->finish_backward();
    r.step(optimizer);
    loss_value = loss.item<float>();
  }
  optimizer.zero_grad();
  return loss_value;
}

namespace {

void check_options(const StepBenchOptions& o) {
  if (o.schedule && (o.cuda_graph || !o.memory_budget.empty() || o.parallel))
    throw ValueError("bench step --resolutions/--shape-schedule: shapes change every step, so the steps run eager on one "
                     "device; drop --cuda-graph, --memory-budget and --nproc-per-node");
  if (o.batch_size <= 0 || o.num_classes <= 0 || o.steps <= 0 || o.warmup < 0) {
    throw ValueError("bench step: batch size, classes and steps must be positive and warm-up non-negative, got " +
                     std::to_string(o.batch_size) + ", " + std::to_string(o.num_classes) + ", " +
                     std::to_string(o.steps) + ", " + std::to_string(o.warmup));
  }
}

// Kernels may still run on a GPU when the host-side step returns; the loss read in
// training_step waits for them, and this makes sure nothing else is queued either.
void synchronize(Device device) {
  if (!device.is_cuda()) return;
  if (auto* events = memory::allocator_for(device).backend().stream_events()) events->synchronize_device();
}

double process_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) * 1e-6;
}

}  // namespace

void time_eager_steps(const std::function<void(std::int64_t)>& step, const std::function<std::int64_t(std::int64_t)>& samples,
                      const StepBenchOptions& options, StepBenchResult& result) {
  const Device device = options.device;
  for (std::int64_t i = 0; i < options.warmup; ++i) step(i);
  synchronize(device);
  if (!options.memory_stats_from_start) {
    reset_peak_memory_stats(device);
    reset_accumulated_memory_stats(device);
  }
  const std::int64_t device_allocs_before = memory::allocator_for(device).stats().num_device_alloc;

  using Clock = std::chrono::steady_clock;
  std::vector<double> cpu_ms;
  if (options.profile_range) ops::profiler_range_start();
  for (std::int64_t i = options.warmup; i < options.warmup + options.steps; ++i) {
    const auto start = Clock::now();
    const double cpu_start = process_cpu_ms();
    step(i);
    synchronize(device);
    result.step_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    cpu_ms.push_back(process_cpu_ms() - cpu_start);
    result.timed_samples += samples(i);
  }
  if (options.profile_range) ops::profiler_range_stop();
  result.memory_stats = memory_stats(device);
  result.device_allocs_per_step =
      static_cast<double>(result.memory_stats.at("num_device_alloc") - device_allocs_before) /
      static_cast<double>(options.steps);
  result.ms_per_step = median(result.step_ms);
  result.cpu_ms_per_step = median(cpu_ms);
  result.img_per_s = static_cast<double>(options.batch_size) * 1000.0 / result.ms_per_step;
  double total_ms = 0;
  for (double ms : result.step_ms) total_ms += ms;
  result.us_per_sample = total_ms * 1000.0 / static_cast<double>(std::max<std::int64_t>(result.timed_samples, 1));
  result.peak_allocated_bytes = max_memory_allocated(device);
  result.peak_reserved_bytes = max_memory_reserved(device);
}

StepBenchResult run_step_bench(const StepBenchOptions& options, std::ostream* progress) {
  const bool language_model = models::is_language_model(options.model);
  if (!language_model) {
    check_options(options);
    if (options.schedule)
      data::check_schedule_for_run(*options.schedule, {.model = options.model, .language_model = false,
                                                     .steps = options.warmup + options.steps,
                                                     .steps_source = "warm-up + timed steps"});
  }
  const Device device = options.device;
  // Only when asked for (the history's ring reserves a few MiB). Saved however the run ends (an
  // OOM in a step included), since the trace is what explains it.
  std::optional<memory::AllocationHistory> history;
  if (!options.alloc_trace_path.empty()) history.emplace().attach(memory::allocator_for(device));
  struct SaveTrace {
    const std::string& path;
    std::optional<memory::AllocationHistory>& history;
    ~SaveTrace() {
      if (!history) return;
      history->detach();
      try {
        memory::save_trace(path, memory::trace_from_history(history->events()));
      } catch (const std::exception& e) {
        std::cerr << "bench step: could not write the allocation trace: " << e.what() << "\n";
      }
    }
  } save_trace{options.alloc_trace_path, history};
  if (language_model) return run_gpt_step_bench(options, progress);
  StepBenchResult result;
  result.options = options;
  result.threads = omp_get_max_threads();

  // Under a schedule the model takes the schedule's channels (a file read may differ from --input).
  const std::int64_t in_channels = options.schedule ? options.schedule->steps.front().channels : options.input.channels;
  auto model = models::create_model(options.model, {.in_channels = in_channels,
                                                    .num_classes = options.num_classes,
                                                    .small_input_stem = options.small_input_stem,
                                                    .seed = options.seed});
  model->train();
  if (device != Device::cpu()) model->to(device);
  model->to(nn::parameter_format_for(device, options.memory_format));
  amp::StepRecipe recipe(options.precision, device);
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(options.lr).momentum(options.momentum));
  if (options.parallel && (options.cuda_graph || !options.memory_budget.empty()))
    throw ValueError("bench step --nproc-per-node: data-parallel steps are eager; drop --cuda-graph and --memory-budget");
  const std::unique_ptr<StepParallel> parallel = options.parallel ? options.parallel(*model) : nullptr;
  std::optional<nn::ModuleRanges> ranges;
  if (options.nvtx) ranges.emplace(*model, nn::nvtx_range_sink());

  Generator generator(options.seed + 1);
  const auto make_batch = [&](std::int64_t batch, std::int64_t channels, std::int64_t height, std::int64_t width) {
    Tensor images =
        randn({batch, channels, height, width}, generator).to(device).contiguous(options.memory_format);
    std::vector<std::int64_t> label_values(static_cast<std::size_t>(batch));
    std::uniform_int_distribution<std::int64_t> pick(0, options.num_classes - 1);
    for (auto& label : label_values) label = pick(generator.engine());
    return std::pair{std::move(images), Tensor::from_vector(label_values, {batch}).to(device)};
  };
  Tensor images, labels;  // not a structured binding: lambdas below capture them (clang 14)
  std::tie(images, labels) =
      make_batch(options.batch_size, options.input.channels, options.input.height, options.input.width);

  if (!options.memory_budget.empty()) {
    auto* resnet = dynamic_cast<models::ResNet*>(model.get());
    if (!resnet) throw ValueError("bench step --memory-budget: recomputes ResNet blocks; " + options.model + " is not one");
    // Measured under the step's autocast: 16-bit activations change what each block holds.
    result.recompute = recipe.forward([&] {
      return models::fit_memory_budget(*resnet, memory::parse_memory_budget(options.memory_budget), images, labels,
                                       optimizer.state_bytes_to_come());
    });
    if (progress) *progress << "bench step: " << result.recompute->summary() << "\n";
  }
  if (progress) *progress << "bench step: " << options.model << " on " << device.str() << ", " << options.warmup
                          << " warm-up + " << options.steps << " timed steps"
                          << (options.schedule ? ", inputs " + options.schedule->describe() : std::string()) << "\n";
  if (options.cuda_graph) {
    time_graphed_steps(*model, optimizer, recipe, std::move(images), std::move(labels), result);
    result.ms_per_step = median(result.step_ms);
    result.img_per_s = static_cast<double>(options.batch_size) * 1000.0 / result.ms_per_step;
    result.us_per_sample = result.ms_per_step * 1000.0 / static_cast<double>(options.batch_size);
    return result;
  }
  if (const data::ShapeSchedule* schedule = options.schedule.get()) {
    // A fresh batch of the step's shape each step, as a loader with variable resolutions hands over.
    images = Tensor();
    labels = Tensor();
    time_eager_steps(
        [&](std::int64_t i) {
          const data::ShapeStep& s = schedule->steps[static_cast<std::size_t>(i)];
          const auto [x, y] = make_batch(s.batch, s.channels, s.height, s.width);
          training_step(*model, optimizer, x, y, parallel.get(), &recipe);
        },
        [&](std::int64_t i) { return schedule->steps[static_cast<std::size_t>(i)].batch; }, options, result);
    return result;
  }
  time_eager_steps([&](std::int64_t) { training_step(*model, optimizer, images, labels, parallel.get(), &recipe); },
                   [&](std::int64_t) { return options.batch_size; }, options, result);
  return result;
}

}  // namespace sublet::bench
