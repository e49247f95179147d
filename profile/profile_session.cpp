#include "profile/profile_session.h"

#include <fmt/format.h>

#include <chrono>
#include <numeric>
#include <optional>
#include <tuple>

#include "memory/annotation.h"
#include "memory/config.h"
#include "core/errors.h"
#include "memory/registry.h"
#include "runtime/amp/step_recipe.h"
#include "runtime/allocation_scope.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/parameter_format.h"
#include "runtime/optim/adam.h"
#include "runtime/optim/sgd.h"

namespace sublet::profile {
namespace {

// A span when a recorder is attached, nothing otherwise (the unprofiled timing steps).
class MaybeSpan {
 public:
  MaybeSpan(LayerRecorder* recorder, const char* name, Phase phase) : recorder_(recorder), name_(name), phase_(phase) {
    if (recorder_) recorder_->open(name_, phase_);
  }
  ~MaybeSpan() { if (recorder_) recorder_->close(name_, phase_); }
  MaybeSpan(const MaybeSpan&) = delete;
  MaybeSpan& operator=(const MaybeSpan&) = delete;

 private:
  LayerRecorder* recorder_;
  const char* name_;
  Phase phase_;
};

std::unique_ptr<optim::Optimizer> make_optimizer(const ProfileOptions& o, const std::vector<Tensor>& params, int* states) {
  if (o.optimizer == "sgd") {
    *states = 1;
    return std::make_unique<optim::SGD>(params, optim::SGDOptions(o.learning_rate).momentum(0.9));
  }
  if (o.optimizer == "adam") {
    *states = 2;
    return std::make_unique<optim::Adam>(params, optim::AdamOptions(o.learning_rate));
  }
  throw ValueError("profile: unknown optimizer '" + o.optimizer + "' (expected sgd or adam)");
}

// The batch every step trains on, drawn once before the profile starts, on the device. Drawing
// it in each step (host random numbers, then an upload of millions of floats) would make the
// profiled step many times slower than `sublet bench step`'s, so its timings would say nothing
// about the real step. Each step still allocates its own copy (a device-to-device copy),
// as a training step allocates the batch it uploads, so the input shows in the step's memory.
std::pair<Tensor, Tensor> make_batch(const ProfileOptions& o, Generator& generator) {
  if (o.seq_len > 0) {
    auto ids = [&] {
      std::vector<std::int64_t> values(static_cast<std::size_t>(o.batch_size * o.seq_len));
      for (auto& v : values) v = static_cast<std::int64_t>(generator.engine()() % static_cast<std::uint64_t>(o.num_classes));
      Tensor t = Tensor::from_vector(values, {o.batch_size, o.seq_len});
      return o.device != Device::cpu() ? t.to(o.device) : t;
    };
    Tensor inputs = ids();
    return {std::move(inputs), ids()};
  }
  Shape shape{o.batch_size};
  shape.insert(shape.end(), o.input_shape.begin(), o.input_shape.end());
  Tensor images = randn(shape, generator, TensorOptions().device(o.device)).contiguous(o.memory_format);
  std::vector<std::int64_t> classes(static_cast<std::size_t>(o.batch_size));
  for (auto& c : classes) c = static_cast<std::int64_t>(generator.engine()() % static_cast<std::uint64_t>(o.num_classes));
  Tensor labels = Tensor::from_vector(classes, {o.batch_size});
  if (o.device != Device::cpu()) labels = labels.to(o.device);
  return {std::move(images), std::move(labels)};
}

// The options with one step's shape in place of the fixed one.
ProfileOptions with_shape(ProfileOptions o, const StepShape& shape) {
  o.batch_size = shape.batch;
  o.seq_len = shape.seq_len;
  if (!shape.input_shape.empty()) o.input_shape = shape.input_shape;
  return o;
}

// The step's inputs: a copy of the batch drawn before the profile, or, with a shape each step, a
// batch of that step's shape drawn now (which the step then owns).
struct StepInput {
  const std::pair<Tensor, Tensor>* fixed = nullptr;
  const ProfileOptions* shaped = nullptr;
  Generator* generator = nullptr;
};

// One training step as PyTorch users write it: zero_grad, forward, loss, backward, step.
// Every tensor of the step is a local of this function, so it is freed before it returns.
float training_step(nn::Module& model, optim::Optimizer& optimizer, amp::StepRecipe& recipe, const StepInput& input,
                    LayerRecorder* recorder) {
  {
    MaybeSpan span(recorder, "(optimizer.zero_grad)", Phase::Optimizer);
    optimizer.zero_grad();
  }
  Tensor images, labels;
  {
    MaybeSpan span(recorder, "(input)", Phase::Forward);
    AllocationCategoryGuard category(memory::BlockCategory::Input);
    if (input.shaped) {
      std::tie(images, labels) = make_batch(*input.shaped, *input.generator);
    } else {
      images = input.fixed->first.clone();
      labels = input.fixed->second.clone();
    }
  }
  const Tensor loss = recipe.forward([&] {
    const Tensor logits = model(images);
    MaybeSpan span(recorder, "(loss)", Phase::Forward);
    return nn::functional::cross_entropy(logits, labels);
  });
  if (recorder) recorder->open_until_module_backward("(loss)");
  recipe.backward(loss);
  if (recorder) recorder->end_backward();
  {
    MaybeSpan span(recorder, "(optimizer.step)", Phase::Optimizer);
    recipe.step(optimizer);
  }
  return loss.item<float>();  // waits for the device, so the step's time is its whole work
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

}  // namespace

std::string StepShape::describe() const {
  if (seq_len > 0) return fmt::format("batch {} x {} tokens", batch, seq_len);
  return fmt::format("batch {} x {}", batch, fmt::join(input_shape, "x"));
}

ProfileRun profile_training(const ModelFactory& make_model, const ProfileOptions& options) {
  if (options.steps < 1) throw ValueError("profile: --steps must be at least 1, got " + std::to_string(options.steps));
  if (options.batch_size < 1) throw ValueError("profile: --batch-size must be at least 1");
  if (options.seq_len <= 0 && options.input_shape.size() != 3)
    throw ValueError("profile: the input shape must be C x H x W");
  if (!options.step_shapes.empty() && options.step_shapes.size() < static_cast<std::size_t>(options.steps))
    throw ValueError(fmt::format("profile: {} step shapes for {} steps", options.step_shapes.size(), options.steps));
  for (const StepShape& shape : options.step_shapes)
    if (shape.batch < 1 || (shape.seq_len <= 0 && shape.input_shape.size() != 3))
      throw ValueError("profile: a step shape needs a batch of at least 1 and a length or a C x H x W input, got " +
                       shape.describe());
  ProfileRun run;
  run.options = options;
  // The inputs of step `step` (1-based; timing steps continue the count).
  std::vector<ProfileOptions> shaped;
  for (const StepShape& shape : options.step_shapes) shaped.push_back(with_shape(options, shape));

  if (!options.alloc_conf.empty()) {
    const memory::AllocatorConfig config =
        memory::AllocatorConfig::parse(options.alloc_conf, memory::default_config(options.device));
    memory::replace_allocator(options.device,
                              memory::make_allocator(options.device, memory::AllocatorKind::Caching, config));
  }
  memory::CachingAllocator& allocator = memory::allocator_for(options.device);
  allocator.empty_cache();
  allocator.reset_peak_memory_stats();
  allocator.reset_accumulated_memory_stats();
  run.allocator_config = allocator.config().to_string();
  run.allocator_config_origin =
      options.alloc_conf.empty() ? memory::config_origin_from_environment().describe() : "from --alloc-conf";
  run.backend_name = allocator.backend().name();
  run.device_capacity = allocator.backend().memory_info().total_bytes;

  Generator generator(options.seed);
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::optional<amp::StepRecipe> recipe;  // its loss scaler's scalars are set-up memory
  std::pair<Tensor, Tensor> batch;  // the profile's input source, made with the model (setup)
  {
    EventLog log(allocator);
    run.baseline = log.baseline();
    {
      memory::AnnotationScope setup("(setup)");  // parameters and optimizer set-up, outside any step
      model = make_model();
      if (options.device != Device::cpu()) model->to(options.device);
      model->to(nn::parameter_format_for(options.device, options.memory_format));
      model->train();
      optimizer = make_optimizer(options, model->parameters(), &run.optimizer_state_per_parameter);
      recipe.emplace(options.precision, options.device);
      AllocationCategoryGuard category(memory::BlockCategory::Input);
      if (shaped.empty()) batch = make_batch(options, generator);
    }
    // Buffers (BatchNorm's running statistics) are model state that lives as long as the
    // parameters; nobody else tags them, and untagged memory would read as temporary.
    for (const auto& buffer : model->buffers()) {
      run.buffer_bytes += buffer.nbytes();
      if (buffer.storage().category() == memory::BlockCategory::Unknown) buffer.storage().set_category(memory::BlockCategory::Parameter);
    }
    for (const auto& p : model->parameters()) {
      ++run.parameter_count;
      run.parameter_bytes += p.nbytes();
      run.parameter_block_bytes += memory::CachingAllocator::round_size(p.nbytes(), allocator.config());
    }
    LayerRecorder recorder(*model, options.model_name, log);
    for (int step = 1; step <= options.steps; ++step) {
      recorder.set_step(step);
      StepRecord record;
      record.step = step;
      allocator.reset_peak_memory_stats();
      record.begin_event = log.count();
      record.begin_ns = log.now_ns();
      record.shape = shaped.empty() ? StepShape{options.batch_size, options.seq_len, options.input_shape}.describe()
                                    : options.step_shapes[static_cast<std::size_t>(step - 1)].describe();
      const StepInput input{&batch, shaped.empty() ? nullptr : &shaped[static_cast<std::size_t>(step - 1)], &generator};
      record.loss = training_step(*model, *optimizer, *recipe, input, &recorder);
      record.end_event = log.count();
      record.end_ns = log.now_ns();
      record.live_peak_allocated = allocator.max_memory_allocated();
      record.live_peak_reserved = allocator.max_memory_reserved();
      record.allocated_at_end = allocator.memory_allocated();
      record.reserved_at_end = allocator.memory_reserved();
      record.segments_at_end = allocator.snapshot();
      if (recorder.any_open()) throw Error("profile: a span of step " + std::to_string(step) + " was left open");
      run.steps.push_back(std::move(record));
      if (step > 1) run.profiled_step_times_ms.push_back(1e-6 * static_cast<double>(run.steps.back().end_ns - run.steps.back().begin_ns));
    }
    log.stop();
    run.events = log.events();
    run.spans = recorder.spans();
    run.final_segments = allocator.snapshot();
    run.summary_at_end = allocator.memory_summary();
  }
  run.accounting = account(run.events, run.baseline, run.final_segments);
  if (run.profiled_step_times_ms.empty())  // a single profiled step: it is the only figure there is
    run.profiled_step_times_ms.push_back(1e-6 * static_cast<double>(run.steps.back().end_ns - run.steps.back().begin_ns));

  // The same steps without hooks or history: what the profile costs per step.
  for (int i = 0; i < options.timing_steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const StepInput input{&batch, shaped.empty() ? nullptr : &shaped[static_cast<std::size_t>(i) % shaped.size()], &generator};
    training_step(*model, *optimizer, *recipe, input, nullptr);
    run.plain_step_times_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  run.profiled_step_ms = mean(run.profiled_step_times_ms);
  run.plain_step_ms = mean(run.plain_step_times_ms);
  return run;
}

}  // namespace sublet::profile
