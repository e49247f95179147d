// sublet profile --model M [--device auto|cpu|cuda|cuda:N] [--batch-size B] [--steps N] [--out DIR]
//                [--alloc-conf STR] [--input CxHxW] [--classes K] [--optimizer sgd|adam]
//                [--precision fp32|bf16|fp16] [--channels-last] [--seq-len N] [--block-size N]
//                [--seq-len-range MIN:MAX --tokens-per-batch N | --resolutions R,R,... | --shape-schedule FILE]
// GPT models (gpt-nano, gpt-mini, gpt2-small) train on random token windows of --seq-len (default
// the model's context) over --classes ids (default 50304, GPT-2's padded vocabulary): the layer
// table then has the attention, MLP and layer norms of every block, and the loss.
// With a shape schedule (runtime/data/shape_schedule.h, as bench step draws or reads it) every step
// trains on its own batch and shape; segment_map.svg then shows how the changing sizes split the
// segments and made reserved memory grow.
// Runs N training steps of a model with hooks on every module and writes the per-layer memory
// study (profile/profile_report.h lists the files) into DIR; prints the last step's layer table.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <optional>

#include "runtime/data/shape_schedule.h"
#include "cli/commands.h"
#include "cli/device_flag.h"
#include "cli/flag_checks.h"
#include "cli/image_shape_flag.h"
#include "cli/precision_flags.h"
#include "cli/shape_schedule_flags.h"
#include "memory/config.h"
#include "core/errors.h"
#include "core/format_bytes.h"
#include "memory/registry.h"
#include "analysis/recompute_plan.h"
#include "models/registry.h"
#include "models/gpt.h"
#include "models/resnet_recompute.h"
#include "runtime/amp/step_recipe.h"
#include "runtime/nn/parameter_format.h"
#include "runtime/factories.h"
#include "ops/conv_settings.h"
#include "profile/profile_report.h"
#include "profile/profile_session.h"
#include "train/train_options.h"

namespace sublet::cli {
namespace {

struct ProfileArgs {
  std::string model = "resnet20";
  std::string device;
  std::int64_t batch_size = 32;
  int steps = 3;
  int timing_steps = 3;
  std::string out = "profile_out";
  std::string alloc_conf;
  std::string input;       // "CxHxW"; default by model family
  std::int64_t classes = 0;  // 0: by model family
  std::string optimizer = "sgd";
  std::string memory_budget;
  double lr = 0.01;
  bool small_input_stem = false;
  std::uint64_t seed = 0;
  // As bench step and PyTorch's defaults for training, so that the profiled step is the step
  // users run (without them the profiled step is several times slower than bench step's).
  bool cudnn_benchmark = true;
  bool tf32 = true;
  bool overwrite = false;
  PrecisionFlags precision;
  std::int64_t seq_len = 0;  // GPT models; 0: the model's context
  std::int64_t block_size = 0;  // GPT models; 0: the model's context
  ShapeScheduleFlags shapes;  // a shape each step
  bool batch_size_given = false, input_given = false, seq_len_given = false;
};

// The schedule the flags ask for (the first `steps` entries are profiled), or nothing.
std::optional<data::ShapeSchedule> schedule_from_flags(const ProfileArgs& args, std::int64_t channels) {
  return shape_schedule_from_flags(
      "profile", args.shapes,
      {.batch_size = args.batch_size_given, .seq_len = args.seq_len_given, .input = args.input_given},
      {.seed = args.seed, .steps = args.steps, .batch_size = args.batch_size, .channels = channels});
}

std::vector<profile::StepShape> step_shapes(const data::ShapeSchedule& schedule, int steps) {
  std::vector<profile::StepShape> shapes;
  for (int i = 0; i < steps; ++i) {
    const data::ShapeStep& s = schedule.steps[static_cast<std::size_t>(i)];
    profile::StepShape shape;
    shape.batch = s.batch;
    shape.seq_len = s.seq_len;
    if (!schedule.tokens()) shape.input_shape = {s.channels, s.height, s.width};
    shapes.push_back(shape);
  }
  return shapes;
}

std::vector<std::int64_t> parse_input_shape(const std::string& text) {
  const ImageShape shape = parse_image_shape("--input", text);
  return {shape.channels, shape.height, shape.width};
}

// torchvision's ImageNet ResNets default to ImageNet inputs; the CIFAR ones to CIFAR inputs.
bool imagenet_model(const std::string& name) { return name == "resnet18" || name == "resnet34" || name == "resnet50"; }

// --memory-budget: the model moves to the device now (profile_training's move is then a no-op)
// and recomputes the blocks fit_memory_budget chooses on a batch of the profiled shape. Returns
// the recomputed blocks for the report.
std::string fit_profile_budget(const ProfileArgs& args, const profile::ProfileOptions& options, nn::Module& model) {
  auto* resnet = dynamic_cast<models::ResNet*>(&model);
  if (!resnet) throw ValueError("profile --memory-budget: recomputes ResNet blocks; " + args.model + " is not one");
  model.to(options.device);
  model.to(nn::parameter_format_for(options.device, options.memory_format));
  model.train();
  std::size_t parameter_bytes = 0;
  for (const Tensor& p : model.parameters()) parameter_bytes += p.nbytes();
  const std::size_t state_bytes = parameter_bytes * (options.optimizer == "adam" ? 2 : 1);
  const Shape image_shape(options.input_shape.begin(), options.input_shape.end());
  // Under the profiled step's autocast: 16-bit activations change what each block holds.
  const models::RecomputeReport report = amp::with_autocast(options.precision, [&] {
    return models::fit_memory_budget(*resnet, memory::parse_memory_budget(args.memory_budget), options.batch_size,
                                     image_shape, options.num_classes, options.device, args.seed + 2, state_bytes);
  });
  fmt::print("{}\n", report.summary());
  return models::describe_runs(report.units, report.runs);
}

// The files in `folder` with the names profile writes (nothing else there counts).
std::vector<std::filesystem::path> earlier_profile_files(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> found;
  for (const std::string& name : profile::profile_file_names()) {
    std::error_code error;
    const std::filesystem::path file = folder / name;
    if (std::filesystem::symlink_status(file, error).type() != std::filesystem::file_type::not_found && !error)
      found.push_back(file);
  }
  return found;
}

void run_profile(const ProfileArgs& args) {
  profile::ProfileOptions options;
  options.model_name = args.model;
  options.device = train::resolve_device(args.device);
  if (!(args.lr > 0.0 && args.lr <= 100.0)) throw ValueError(fmt::format("--lr must be in (0, 100], got {}", args.lr));
  memory::AllocatorConfig::parse(args.alloc_conf, {}, "--alloc-conf");  // fails here, not after the model is built
  if (!args.memory_budget.empty()) memory::parse_memory_budget(args.memory_budget);  // likewise
  check_output_folder("--out", args.out);  // before the run, not after it: the folder and every file
  for (const std::string& name : profile::profile_file_names()) check_output_file("--out", std::filesystem::path(args.out) / name);
  // A folder holding an earlier run's files would mix two runs (a 2-step run's step_diff.txt
  // beside a 1-step run's files): refused, unless --overwrite says to replace them.
  const std::vector<std::filesystem::path> earlier = earlier_profile_files(args.out);
  if (!earlier.empty() && !args.overwrite) {
    std::string names;
    for (const auto& file : earlier) names += (names.empty() ? "" : ", ") + file.filename().string();
    throw IoError("--out " + args.out + ": holds files of an earlier profile (" + names +
                  "); pass --overwrite to replace them, or choose another folder");
  }
  options.batch_size = args.batch_size;
  options.steps = args.steps;
  options.timing_steps = args.timing_steps;
  options.alloc_conf = args.alloc_conf;
  const bool language_model = models::is_language_model(args.model);
  if (language_model) {
    if (!args.input.empty()) throw ValueError("--input: " + args.model + " takes token windows; use --seq-len");
    if (!args.memory_budget.empty()) throw ValueError("profile --memory-budget recomputes ResNet blocks; " + args.model + " is a GPT");
    if (args.precision.memory_format() == MemoryFormat::ChannelsLast)
      throw ValueError("--channels-last is for image models; " + args.model + " has no channels");
    options.num_classes = args.classes > 0 ? args.classes : 50304;
    const std::int64_t context =
        args.block_size > 0 ? args.block_size : models::gpt_config(args.model, options.num_classes).block_size;
    options.seq_len = args.seq_len > 0 ? args.seq_len : context;
    if (options.seq_len > context)
      throw ValueError(fmt::format("--seq-len {} is longer than {}'s context of {}", options.seq_len, args.model, context));
    options.input_shape = {options.seq_len};
  } else {
    if (args.seq_len > 0) throw ValueError("--seq-len is for GPT models; " + args.model + " takes images (--input)");
    if (args.block_size > 0) throw ValueError("--block-size is for GPT models; " + args.model + " takes images");
    options.input_shape =
        parse_input_shape(!args.input.empty() ? args.input : imagenet_model(args.model) ? "3x224x224" : "3x32x32");
    options.num_classes = args.classes > 0 ? args.classes : imagenet_model(args.model) ? 1000 : 10;
  }
  if (const std::optional<data::ShapeSchedule> schedule =
          schedule_from_flags(args, language_model ? 1 : options.input_shape[0])) {  // a GPT refuses images below
    if (!args.memory_budget.empty()) throw ValueError("profile --memory-budget: fits one batch shape; drop it with a shape schedule");
    data::check_schedule_for_run(*schedule, {.model = args.model,
                                             .language_model = language_model,
                                             .context = language_model ? options.input_shape[0] : 0,
                                             .steps = args.steps,
                                             .steps_source = "--steps",
                                             .context_hint = "--block-size sets a longer one"});
    options.step_shapes = step_shapes(*schedule, args.steps);
    const profile::StepShape& last = options.step_shapes.back();  // the step the layer table shows
    options.batch_size = last.batch;
    if (language_model) options.seq_len = last.seq_len, options.input_shape = {last.seq_len};
    else options.input_shape = last.input_shape;
  }
  options.optimizer = args.optimizer;
  options.learning_rate = args.lr;
  options.seed = args.seed;
  options.precision = args.precision.parsed_precision();
  options.memory_format = args.precision.memory_format();
  if (options.precision == amp::Precision::Fp16 && !options.device.is_cuda())
    throw DeviceError("profile --precision fp16: float16 training needs a CUDA device (as PyTorch, the CPU's autocast "
                      "is bfloat16 only), this run is on " + options.device.str());
  ops::set_conv_algorithm_settings({.benchmark = args.cudnn_benchmark, .allow_tf32 = args.tf32});

  const models::ModelOptions model_options{.in_channels = options.input_shape[0],
                                           .num_classes = options.num_classes,
                                           .small_input_stem = args.small_input_stem,
                                           .vocab_size = options.num_classes,
                                           .seed = args.seed,
                                           .block_size = language_model ? args.block_size : 0};
  const std::string input = !options.step_shapes.empty() ? "a shape each step"
                            : language_model ? fmt::format("{} tokens of {}", options.seq_len, options.num_classes)
                                             : fmt::format("{}", fmt::join(options.input_shape, "x"));
  if (options.step_shapes.empty())
    fmt::print("Profiling {} on {}: batch {}, input {}, {} steps (+{} unprofiled for timing)...\n", args.model,
               options.device.str(), options.batch_size, input, options.steps, options.timing_steps);
  else
    fmt::print("Profiling {} on {}: {} steps of changing shape (+{} unprofiled for timing)...\n", args.model,
               options.device.str(), options.steps, options.timing_steps);
  std::fflush(stdout);
  std::string recomputed;
  profile::ProfileRun run = profile::profile_training(
      [&] {
        auto model = models::create_model(args.model, model_options);
        if (!args.memory_budget.empty()) recomputed = fit_profile_budget(args, options, *model);
        return model;
      },
      options);
  run.options.recomputed = recomputed;
  // Only now, with the new results in hand: a run that fails leaves the earlier files as they were.
  for (const auto& file : earlier) {
    std::error_code error;
    std::filesystem::remove(file, error);
    if (error) throw IoError("--out " + args.out + ": cannot remove the earlier " + file.filename().string() + " (" + error.message() + ")");
  }
  const profile::ProfileReport report = profile::write_profile(run, args.out);

  fmt::print("\nLayer table, step {} ('*': the span holds the step's peak; entry = allocated at entry; peak+ = highest "
             "allocated inside minus entry):\n\n{}\n",
             run.steps.back().step, report.table);
  // The summary's first block (step peaks) and the overhead line, then where everything is.
  const std::string& summary = report.summary;
  fmt::print("{}\n", summary.substr(0, summary.find("Static estimate")));
  const auto overhead_at = summary.find("Overhead of profiling");
  if (overhead_at != std::string::npos) fmt::print("{}", summary.substr(overhead_at, summary.find("\n\n", overhead_at) - overhead_at + 1));
  fmt::print("\nWrote {} files to {}/:", report.files.size(), args.out);
  for (const auto& file : report.files) fmt::print(" {}", file.substr(file.find_last_of('/') + 1));
  if (!options.step_shapes.empty()) {
    fmt::print("\nStep shapes:");
    for (const auto& step : run.steps) fmt::print(" {}: {};", step.step, step.shape);
    fmt::print("\nsegment_map.svg shows which requests split which blocks and where reserved memory grew.\n");
  }
  fmt::print("\nOpen trace.json in Perfetto (ui.perfetto.dev) or chrome://tracing, snapshot.pickle in pytorch.org/memory_viz,"
             " memory.html in a browser; replay with: sublet replay {}/alloc_trace.json\n", args.out);
}

}  // namespace

void add_profile_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("profile", "Per-layer memory study of a few training steps (tables, trace, snapshot, plots)");
  auto args = std::make_shared<ProfileArgs>();
  cmd->add_option("--model", args->model, "model name (" + fmt::format("{}", fmt::join(models::model_names(), ", ")) + ")")
      ->check(CLI::IsMember(models::model_names()))
      ->capture_default_str();
  add_device_option(*cmd, args->device);
  CLI::Option* batch_size =
      cmd->add_option("--batch-size", args->batch_size, "batch size")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--steps", args->steps, "profiled training steps (2 or more for the step diff)")->check(CLI::Range(1, 1000))->capture_default_str();
  cmd->add_option("--timing-steps", args->timing_steps, "unprofiled steps afterwards, to measure the overhead")->check(CLI::Range(0, 1000))->capture_default_str();
  cmd->add_option("--out", args->out, "output folder")->capture_default_str();
  cmd->add_flag("--overwrite", args->overwrite,
                "replace the files of an earlier profile in --out (those with the names profile writes; nothing else)");
  cmd->add_option("--alloc-conf", args->alloc_conf, "SUBLET_ALLOC_CONF string for the profiled allocator (default: the environment's)");
  CLI::Option* input =
      cmd->add_option("--input", args->input, "input shape CxHxW (default 3x224x224 for resnet18/34/50, else 3x32x32)");
  cmd->add_option("--classes", args->classes,
                  "number of classes (default 1000 for resnet18/34/50, else 10; GPT models: the vocabulary, default 50304)")
      ->check(CLI::Range(1, 1 << 20));
  CLI::Option* seq_len = cmd->add_option("--seq-len", args->seq_len, "GPT models: tokens per window (default: the model's context)")
                              ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--block-size", args->block_size,
                  "GPT models: the context (default: the model's; gpt-nano 64, gpt-mini 256, gpt2-small 1024)")
      ->check(CLI::Range(1, 1 << 20));
  add_shape_schedule_flags(*cmd, args->shapes, {.read_help = "its first --steps entries are profiled"});
  cmd->add_option("--optimizer", args->optimizer, "sgd (momentum 0.9) or adam")->check(CLI::IsMember({"sgd", "adam"}))->capture_default_str();
  cmd->add_option("--lr", args->lr, "learning rate")->capture_default_str();
  cmd->add_option("--memory-budget", args->memory_budget,
                  "recompute ResNet blocks in backward so the step fits SIZE (6GiB) or a FRACTION of its measured peak (0.5)");
  add_precision_flags(*cmd, args->precision);
  cmd->add_flag("--small-input-stem", args->small_input_stem, "resnet18/34/50: 3x3 stride-1 stem without max-pool (for 32x32 inputs)");
  cmd->add_option("--seed", args->seed, "seed of the model's initialisation and the synthetic data")
      ->check(non_negative_integer())
      ->capture_default_str();
  add_default_on_switch(*cmd, "cudnn-benchmark", args->cudnn_benchmark,
                        "time every cuDNN algorithm once per shape, as bench step and torch.backends.cudnn.benchmark");
  add_default_on_switch(*cmd, "tf32", args->tf32, "allow TF32 tensor-core math in float32 convolutions, PyTorch's default");
  cmd->callback([args, batch_size, input, seq_len] {
    args->batch_size_given = batch_size->count() > 0;
    args->input_given = input->count() > 0;
    args->seq_len_given = seq_len->count() > 0;
    run_profile(*args);
  });
}

}  // namespace sublet::cli
