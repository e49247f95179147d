#include "train/train_options.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/errors.h"
#include "runtime/amp/precision.h"
#include "analysis/recompute_plan.h"
#include "memory/registry.h"
#include "models/gpt.h"
#include "models/registry.h"
#include "runtime/data/shape_schedule.h"

namespace sublet::train {
namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

void check_member(const std::string& flag, const std::string& value, const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    throw ValueError(flag + ": unknown value '" + value + "'; expected one of " + join(allowed));
  }
}

void check_at_least(const std::string& flag, std::int64_t value, std::int64_t minimum) {
  if (value < minimum) {
    throw ValueError(flag + " must be >= " + std::to_string(minimum) + ", got " + std::to_string(value));
  }
}

// The value as the user typed it (0.5, not std::to_string's 0.500000).
std::string number_text(double value) { return fmt::format("{}", value); }

// Parses without touching the device: validate() must work on a machine without a GPU.
Device parse_device_text(const std::string& text) {
  if (text == "auto") return Device::cpu();
  try {
    return Device::parse(text);
  } catch (const ValueError&) {
    throw ValueError("--device: unknown value '" + text + "'; expected auto, cpu, cuda or cuda:N");
  }
}

// A shape schedule fits GPT runs only, and only runs whose steps may change shape.
void check_shape_schedule(const TrainOptions& options) {
  if (!is_language_model_run(options))
    throw ValueError("--seq-len-range/--shape-schedule: a shape schedule gives GPT models a window length each step; "
                     "--model " + options.model + " is an image model (fixed --batch-size batches of its images)");
  if (options.cuda_graph)
    throw ValueError("--cuda-graph replays one captured step of fixed shapes, and the shape schedule changes the "
                     "shapes every step; drop one of them");
  if (options.seq_len > 0)
    throw ValueError("--seq-len: the shape schedule sets every step's window length (and the evaluation takes the "
                     "model's context); drop --seq-len");
  data::check_schedule_for_run(*options.shape_schedule,
                               {.model = options.model,
                                .language_model = true,
                                .context = models::gpt_config(options.model, 256).block_size,
                                .steps = options.steps,
                                .steps_source = "--steps",
                                .context_hint = "its position embeddings; lower the MAX of --seq-len-range"});
}

}  // namespace

std::vector<std::string> dataset_names() { return {"mnist", "fashion-mnist", "cifar10", "synthetic", "text", "tokens"}; }

bool is_language_model_run(const TrainOptions& options) { return models::is_language_model(options.model); }

std::int64_t warmup_steps_of(const TrainOptions& options) {
  return options.warmup_steps >= 0 ? options.warmup_steps : std::min<std::int64_t>(100, options.steps / 10);
}

std::int64_t evaluations_of(const TrainOptions& options) {
  return (options.steps + options.eval_interval - 1) / options.eval_interval;
}
std::vector<std::string> optimizer_names() { return {"sgd", "adam", "adamw"}; }
std::vector<std::string> schedule_names() { return {"none", "step", "cosine"}; }

double default_lr(const std::string& optimizer) { return optimizer == "sgd" ? 0.1 : 1e-3; }

std::filesystem::path default_data_dir(const std::string& data) {
  if (data == "mnist") return "data/mnist";
  if (data == "fashion-mnist") return "/usr/share/datasets/fashion-mnist";  // Debian's dataset-fashion-mnist
  if (data == "cifar10") return "data/cifar-10-batches-bin";
  return {};
}

void validate(const TrainOptions& options) {
  check_member("--model", options.model, models::model_names());
  check_member("--data", options.data, dataset_names());
  check_member("--optimizer", options.optimizer, optimizer_names());
  check_member("--schedule", options.schedule, schedule_names());
  parse_device_text(options.device);
  check_member("--memory-plan", options.memory_plan, {"cached", "static"});
  amp::parse_precision(options.precision);  // ValueError naming --precision and the choices
  if (!options.memory_budget.empty()) memory::parse_memory_budget(options.memory_budget);  // ValueError naming it
  check_at_least("--epochs", options.epochs, 1);
  // The schedules count epochs x images in int64; a typo such as 1e20 epochs must not wrap.
  if (options.epochs > kMaxEpochs) {
    throw ValueError("--epochs must be <= " + std::to_string(kMaxEpochs) + ", got " + std::to_string(options.epochs));
  }
  check_at_least("--batch-size", options.batch_size, 1);
  // 1 KiB up to 4 GiB; a fraction of a MiB is allowed (as DDP's bucket_cap_mb).
  if (!(options.bucket_cap_mb >= 1.0 / 1024.0 && options.bucket_cap_mb <= 4096))
    throw ValueError(fmt::format("--bucket-cap-mb must be in [0.0009765625 (1 KiB), 4096], got {:g}", options.bucket_cap_mb));
  check_member("--backend", options.backend, {"auto", "nccl", "gloo"});
  if (options.backend == "nccl" && options.device == "cpu")
    throw ValueError("--backend nccl connects GPUs, and --device cpu asks for the CPU; use --backend gloo (the CPU's "
                     "default)");
  if (!(options.dist_timeout_s >= 0.1 && options.dist_timeout_s <= 86400))
    throw ValueError(fmt::format("--dist-timeout must be in [0.1, 86400] seconds, got {:g}", options.dist_timeout_s));
  if (options.data_parallel && options.cuda_graph)
    throw ValueError("--cuda-graph is not supported with data parallel yet (the all-reduce hooks run on the host "
                     "during backward); train without --cuda-graph or on one GPU");
  if (options.sync_batch_norm && !options.data_parallel)
    throw ValueError("--sync-batch-norm shares batch statistics between data-parallel ranks; it needs --nproc-per-node "
                     "(or a launcher's RANK and WORLD_SIZE)");
  if (options.data_parallel && !options.memory_budget.empty())
    throw ValueError("--memory-budget is not supported with data parallel yet; train without it or on one GPU");
  // Far beyond any device's memory for these models; keeps sizes well inside int64 arithmetic.
  if (options.batch_size > (1 << 20)) {
    throw ValueError("--batch-size must be <= 1048576, got " + std::to_string(options.batch_size));
  }
  check_at_least("--limit-train", options.limit_train, 0);
  check_at_least("--limit-test", options.limit_test, 0);
  if (!(options.lr >= 0.0) || options.lr > 100.0) {
    throw ValueError("--lr must be in (0, 100] (or 0 for the optimizer's default), got " + number_text(options.lr));
  }
  if (!(options.momentum >= 0.0 && options.momentum < 1.0)) {
    throw ValueError("--momentum must be in [0, 1), got " + number_text(options.momentum));
  }
  if (!(options.label_smoothing >= 0.0 && options.label_smoothing < 1.0)) {
    throw ValueError("--label-smoothing must be in [0, 1), got " + number_text(options.label_smoothing));
  }
  // Finite and at most 1 (a decay of the whole weight per unit of learning rate): inf trained
  // to a NaN loss and a checkpoint of non-finite values.
  if (!(options.weight_decay >= 0.0 && options.weight_decay <= 1.0)) {
    throw ValueError("--weight-decay must be in [0, 1], got " + number_text(options.weight_decay));
  }
  if (options.prefetch_batches < 0 || options.prefetch_batches > 16) {
    throw ValueError("prefetch batches must be in [0, 16], got " + std::to_string(options.prefetch_batches));
  }
  const bool token_data = options.data == "text" || options.data == "tokens";
  if (options.shape_schedule) check_shape_schedule(options);
  if (is_language_model_run(options)) {
    if (!token_data)
      throw ValueError("--data " + options.data + ": --model " + options.model + " is a GPT, which trains on text or tokens");
    check_at_least("--seq-len", options.seq_len, 0);
    check_at_least("--steps", options.steps, 1);
    check_at_least("--eval-interval", options.eval_interval, 1);
    check_at_least("--eval-batches", options.eval_batches, 0);
    check_at_least("--warmup-steps", options.warmup_steps, -1);
    if (options.steps > (std::int64_t{1} << 40))
      throw ValueError("--steps must be <= 2^40, got " + std::to_string(options.steps));
    if (!(options.grad_clip >= 0.0) || options.grad_clip > 1e6)
      throw ValueError("--grad-clip must be in [0, 1e6] (0: no clipping), got " + number_text(options.grad_clip));
    if (!(options.validation_fraction > 0.0 && options.validation_fraction < 1.0))
      throw ValueError("--val-fraction must be in (0, 1), got " + number_text(options.validation_fraction));
    if (options.data_parallel) throw ValueError("data parallel is not supported for GPT models yet; train on one device");
    if (options.channels_last) throw ValueError("--channels-last is for image models; a GPT has no channels");
    if (options.schedule == "step") throw ValueError("--schedule step counts epochs; GPT runs take cosine or none");
  } else if (token_data) {
    throw ValueError("--data " + options.data + " holds tokens for GPT models (gpt-nano, gpt-mini, gpt2-small); --model " +
                     options.model + " is an image model");
  }
  if (options.data == "synthetic") {
    check_at_least("synthetic channels", options.synthetic_channels, 1);
    check_at_least("synthetic height", options.synthetic_height, 1);
    check_at_least("synthetic width", options.synthetic_width, 1);
    check_at_least("synthetic train size", options.synthetic_train_size, 1);
    check_at_least("synthetic test size", options.synthetic_test_size, 1);
  }
}

Device resolve_device(const std::string& text) {
  if (text == "auto") return memory::default_device();
  const Device device = parse_device_text(text);
  if (device.is_cuda()) {
    if (!memory::cuda_built()) {
      throw DeviceError("--device " + text + ": this sublet was built without CUDA; use --device cpu");
    }
    if (memory::cuda_device_count() == 0)
      throw DeviceError("--device " + text + ": no usable CUDA device here (no GPU, or no driver); use --device cpu");
    if (device.index >= memory::cuda_device_count()) {
      throw DeviceError("--device " + text + ": " + std::to_string(memory::cuda_device_count()) +
                        " CUDA device(s) available; use --device cpu or a smaller index");
    }
  }
  return device;
}

}  // namespace sublet::train
