// sublet bench step [--device auto|cpu|cuda|cuda:N] --model M[,M...] [--input CxHxW] [--batch-size B]
//                   [--classes K] [--steps N] [--warmup W] [--small-input-stem] [--seed S] [--json PATH]
//                   [--cuda-graph] [--allocator caching|raw|async|all] [--precision fp32|bf16|fp16] [--channels-last]
//                   [--nproc-per-node N [--bucket-cap-mb MB] ...]   (data parallel: cli/bench_step_parallel.h)
//                   [--seq-len N] [--vocab V] [--block-size N]   (GPT models: token windows instead of images)
//                   [--seq-len-range MIN:MAX --tokens-per-batch N | --resolutions R,R,...]   (a shape each step)
//                   [--shape-schedule FILE] [--write-shape-schedule FILE] [--alloc-conf-sweep[=LIST]]
// Times training steps of a model (bench/step); bench/pytorch_step.py takes the same flags.
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/alloc/report_json.h"
#include "runtime/data/shape_schedule.h"
#include "bench/step/step_bench.h"
#include "bench/step/step_report.h"
#include "bench/step/sweep_report.h"
#include "cli/bench_step_parallel.h"
#include "cli/commands.h"
#include "cli/config_report.h"
#include "cli/data_parallel_launch.h"
#include "cli/device_flag.h"
#include "cli/flag_checks.h"
#include "cli/image_shape_flag.h"
#include "cli/run_files.h"
#include "cli/shape_schedule_flags.h"
#include "cli/precision_flags.h"
#include "ops/conv_settings.h"
#include "core/errors.h"
#include "analysis/recompute_plan.h"
#include "analysis/static_plan.h"
#include "memory/alloc_conf_sweep.h"
#include "memory/registry.h"
#include "models/gpt.h"
#include "models/registry.h"
#include "runtime/nn/module_ranges.h"
#include "train/train_options.h"

namespace sublet::cli {
namespace {

struct StepFlags {
  std::string device = "auto";
  std::vector<std::string> models;
  std::string input = "3x32x32";
  std::int64_t batch_size = 128;
  std::int64_t classes = 10;
  std::int64_t steps = 20;
  std::int64_t warmup = 3;
  bool small_input_stem = false;
  std::uint64_t seed = 0;
  std::string json_path;
  bool cuda_graph = false;
  std::string memory_plan = "static";
  bool memory_plan_given = false;
  std::string memory_budget;
  std::string plan_heuristic;
  std::string plan_trace_path;
  std::string allocator = "caching";
  // PyTorch's defaults for the comparison script: cudnn.benchmark on (set there), TF32 allowed
  // for cuDNN convolutions (torch.backends.cudnn.allow_tf32 defaults to True).
  bool cudnn_benchmark = true;
  bool tf32 = true;
  int cudnn_benchmark_limit = 10;
  bool profile_range = false;
  std::string alloc_trace_path;
  std::int64_t bucket_cap_mb = 25;
  bool nvtx = false;
  PrecisionFlags precision;
  std::int64_t seq_len = 0;       // GPT models
  std::int64_t vocab_size = 50304;
  std::int64_t block_size = 0;
  ShapeScheduleFlags shapes;  // a shape each step
  bool alloc_conf_sweep = false;
  std::string alloc_conf_sweep_list;  // empty: the standard list
  // Given on the command line (not just defaults): refused together with a schedule.
  bool batch_size_given = false, seq_len_given = false, input_given = false;
};

// The schedule the flags ask for, or null. Drawn from --seed for warm-up + timed steps.
std::shared_ptr<const data::ShapeSchedule> schedule_from_flags(const StepFlags& flags, std::int64_t channels) {
  std::optional<data::ShapeSchedule> schedule = shape_schedule_from_flags(
      "bench step", flags.shapes,
      {.batch_size = flags.batch_size_given, .seq_len = flags.seq_len_given, .input = flags.input_given},
      {.seed = flags.seed, .steps = flags.warmup + flags.steps, .batch_size = flags.batch_size, .channels = channels});
  if (!schedule) return nullptr;
  return std::make_shared<const data::ShapeSchedule>(std::move(*schedule));
}

// One setting's outcome: the row, the run (none when it ran out of memory) and the statistics
// the row was read from.
struct SweepEntry {
  memory::SweepRow row;
  std::optional<bench::StepBenchResult> run;
  std::map<std::string, std::int64_t> memory_stats;
};

// One model under every setting of the sweep, each with a fresh caching allocator whose
// statistics cover the whole run (model, warm-up and timed steps); a setting that runs out of
// memory keeps its row (its statistics say so) without a time.
std::vector<SweepEntry> run_sweep(bench::StepBenchOptions options, const std::vector<memory::SweepSetting>& settings) {
  options.memory_stats_from_start = true;
  std::vector<SweepEntry> entries;
  for (const memory::SweepSetting& setting : settings) {
    memory::replace_allocator(options.device, memory::make_allocator(options.device, memory::AllocatorKind::Caching,
                                                                     setting.config));
    std::cerr << "bench step: " << options.model << " under allocator setting " << setting.label
              << (setting.label == setting.config.to_string()
                      ? ""
                      : " (" + (setting.config.to_string().empty() ? "no knob set" : setting.config.to_string()) + ")")
              << "\n";
    SweepEntry entry;
    try {
      entry.run = bench::run_step_bench(options, &std::cerr);
      entry.memory_stats = entry.run->memory_stats;
    } catch (const OutOfMemoryError& e) {
      std::cerr << "bench step: " << setting.label << ": " << e.what() << "\n";
      entry.memory_stats = memory::allocator_for(options.device).memory_stats();
    }
    entry.row = memory::sweep_row_from_stats(setting.label, setting.config.to_string(), entry.memory_stats);
    if (entry.run) entry.row.us_per_sample = entry.run->us_per_sample;
    entries.push_back(std::move(entry));
  }
  return entries;
}

// "all": every allocator the device supports (the driver's async pool exists only on CUDA).
std::vector<memory::AllocatorKind> allocator_kinds(const std::string& text, Device device) {
  using memory::AllocatorKind;
  if (text != "all") return {memory::parse_allocator_kind(text)};
  if (device.is_cuda()) return {AllocatorKind::Caching, AllocatorKind::Raw, AllocatorKind::Async};
  return {AllocatorKind::Caching, AllocatorKind::Raw};
}

void run_bench_step(const StepFlags& flags) {
  check_output_file("--json", flags.json_path);
  check_output_file("--alloc-trace", flags.alloc_trace_path);
  bench::StepBenchOptions options;
  // Before the device: no machine replays one captured step over shapes that change every step.
  if (flags.cuda_graph && flags.shapes.given())
    throw ValueError("bench step --cuda-graph: a CUDA graph replays one step of fixed shapes, and --seq-len-range, "
                     "--resolutions or --shape-schedule give every step its own; drop --cuda-graph or the shapes");
  options.device = train::resolve_device(flags.device);  // the same messages as every --device
  // Before the model is built, not after.
  if (flags.cuda_graph && !options.device.is_cuda())
    throw DeviceError("bench step --cuda-graph: needs --device cuda (CUDA graphs exist only on the GPU), this run is on " +
                      options.device.str());
  const ImageShape input = parse_image_shape("--input", flags.input);
  options.input = {input.channels, input.height, input.width};
  options.batch_size = flags.batch_size;
  options.num_classes = flags.classes;
  options.seq_len = flags.seq_len;
  options.vocab_size = flags.vocab_size;
  options.block_size = flags.block_size;
  options.steps = flags.steps;
  options.warmup = flags.warmup;
  options.small_input_stem = flags.small_input_stem;
  options.seed = flags.seed;
  options.cuda_graph = flags.cuda_graph;
  options.memory_plan = parse_memory_plan(flags.memory_plan);
  options.memory_budget = flags.memory_budget;
  options.plan_heuristic = flags.plan_heuristic;
  options.plan_trace_path = flags.plan_trace_path;
  if ((!flags.plan_heuristic.empty() || !flags.plan_trace_path.empty()) &&
      (options.memory_plan != MemoryPlan::Static || !flags.cuda_graph))
    throw ValueError("bench step --plan-heuristic and --plan-trace: need --cuda-graph with --memory-plan static");
  check_output_file("--plan-trace", flags.plan_trace_path);
  check_output_file("--write-shape-schedule", flags.shapes.write_path);
  RunFiles()
      .input("--shape-schedule", flags.shapes.read_path, "shape schedule")
      .output("--write-shape-schedule", flags.shapes.write_path, "shape schedule")
      .output("--json", flags.json_path, "report")
      .output("--alloc-trace", flags.alloc_trace_path, "allocation trace")
      .output("--plan-trace", flags.plan_trace_path, "plan trace")
      .check();
  if (!flags.memory_budget.empty()) memory::parse_memory_budget(flags.memory_budget);  // before any model is built
  if (flags.memory_plan_given && !flags.cuda_graph)
    throw ValueError("bench step --memory-plan: lays out a captured step's memory, so it needs --cuda-graph");
  options.profile_range = flags.profile_range;
  options.nvtx = flags.nvtx;
  options.precision = flags.precision.parsed_precision();
  options.memory_format = flags.precision.memory_format();
  if (options.precision == amp::Precision::Fp16 && !options.device.is_cuda())
    throw DeviceError("bench step --precision fp16: float16 training needs --device cuda (as PyTorch, the CPU's "
                      "autocast is bfloat16 only), this run is on " + options.device.str());
  if (flags.nvtx) nn::nvtx_range_sink();  // DeviceError now, in a build without CUDA
  ops::set_conv_algorithm_settings(
      {.benchmark = flags.cudnn_benchmark, .allow_tf32 = flags.tf32, .benchmark_limit = flags.cudnn_benchmark_limit});
  if (options.device.is_cuda())
    std::cerr << "bench step: cuDNN algorithms " << (flags.cudnn_benchmark ? "timed per shape" : "from heuristics")
              << ", TF32 " << (flags.tf32 ? "allowed" : "off") << " for convolutions\n";
  if (flags.shapes.given() &&
      (flags.cuda_graph || !flags.memory_budget.empty() || launched_as_worker()))
    throw ValueError("bench step: with a shape each step the steps run eager on one device; drop --cuda-graph, "
                     "--memory-budget and --nproc-per-node");
  options.schedule = schedule_from_flags(flags, options.input.channels);
  if (options.schedule && !options.schedule->tokens()) options.batch_size = options.schedule->batch_size;
  if (options.schedule)  // before the first model is built, so a bad schedule fails at once
    for (const auto& model : flags.models)
      data::check_schedule_for_run(
          *options.schedule,
          {.model = model,
           .language_model = models::is_language_model(model),
           .context = flags.block_size > 0                 ? flags.block_size
                      : models::is_language_model(model) ? models::gpt_config(model, flags.vocab_size).block_size
                                                         : 0,
           .steps = flags.warmup + flags.steps,
           .steps_source = "warm-up + timed steps",
           .context_hint = "--block-size sets a longer one"});
  if (options.schedule) write_shape_schedule_if_asked(flags.shapes, *options.schedule, std::cout);
  if (flags.alloc_conf_sweep) {
    if (flags.allocator != "caching")
      throw ValueError("bench step --alloc-conf-sweep: tries settings of the caching allocator; drop --allocator " +
                       flags.allocator);
    if (!flags.alloc_trace_path.empty() || flags.cuda_graph || launched_as_worker())
      throw ValueError("bench step --alloc-conf-sweep: runs eager steps once per setting; drop --alloc-trace, "
                       "--cuda-graph and --nproc-per-node");
    const std::vector<memory::SweepSetting> settings = memory::parse_sweep_settings(flags.alloc_conf_sweep_list, options.device);
    nlohmann::json reports = nlohmann::json::array();
    for (const auto& model : flags.models) {
      options.model = model;
      const std::vector<SweepEntry> entries = run_sweep(options, settings);
      const std::string sample = models::is_language_model(model) ? "token" : "image";
      std::cout << model << " on " << options.device.str() << ", " << flags.warmup << " warm-up + " << flags.steps
                << " timed steps"
                << (options.schedule ? ", inputs " + options.schedule->describe() : std::string()) << ":\n";
      std::vector<memory::SweepRow> rows;
      for (const auto& entry : entries) rows.push_back(entry.row);
      bench::print_sweep_table(rows, sample, std::cout);
      nlohmann::json json_rows = nlohmann::json::array();
      for (const auto& entry : entries) {
        nlohmann::json row = bench::sweep_row_json(entry.row, sample);
        row["memory_stats"] = entry.memory_stats;  // what the columns were read from
        row["run"] = entry.run ? bench::step_json(*entry.run) : nlohmann::json(nullptr);
        json_rows.push_back(row);
      }
      reports.push_back({{"format", "sublet-alloc-conf-sweep"},
                         {"framework", "sublet"},
                         {"model", model},
                         {"device", options.device.str()},
                         {"precision", amp::precision_name(options.precision)},
                         {"steps", flags.steps},
                         {"warmup", flags.warmup},
                         {"shape_schedule", options.schedule ? data::shape_schedule_json(*options.schedule)
                                                             : nlohmann::json(nullptr)},
                         {"rows", json_rows}});
    }
    if (!flags.json_path.empty()) {
      bench::write_text_file(flags.json_path, (reports.size() == 1 ? reports[0] : reports).dump(2) + "\n");
      std::cout << "wrote " << flags.json_path << "\n";
    }
    return;
  }
  const auto kinds = allocator_kinds(flags.allocator, options.device);
  if (!flags.alloc_trace_path.empty() && (flags.models.size() != 1 || kinds.size() != 1))
    throw ValueError("bench step --alloc-trace: records one run, so give one --model and one --allocator; got " +
                     std::to_string(flags.models.size()) + " model(s) and " + std::to_string(kinds.size()) + " allocator(s)");
  options.alloc_trace_path = flags.alloc_trace_path;
  if (launched_as_worker()) {
    if (flags.models.size() != 1 || kinds.size() != 1 || flags.cuda_graph || !flags.memory_budget.empty())
      throw ValueError("bench step --nproc-per-node: times one model with one allocator in eager data-parallel steps; "
                       "give one --model, one --allocator, and no --cuda-graph or --memory-budget");
    options.model = flags.models.front();
    options.allocator = kinds.front();
    memory::replace_allocator(options.device, memory::make_allocator(options.device, options.allocator));
    const auto report = run_data_parallel_step(options, flags.bucket_cap_mb, &std::cerr);
    if (!report) return;  // rank 0 reports for all
    print_data_parallel_table(*report, std::cout);
    if (!flags.json_path.empty()) {
      bench::write_text_file(flags.json_path, data_parallel_json(*report).dump(2) + "\n");
      std::cout << "wrote " << flags.json_path << "\n";
    }
    return;
  }
  std::vector<bench::StepBenchResult> results;
  for (const auto& model : flags.models) {
    options.model = model;
    for (memory::AllocatorKind kind : kinds) {
      options.allocator = kind;
      // Every tensor of the previous run is gone by now (replace_allocator refuses otherwise);
      // a fresh allocator also starts with empty statistics and cache.
      memory::replace_allocator(options.device, memory::make_allocator(options.device, kind));
      std::cerr << "bench step: allocator " << memory::allocator_kind_name(kind)
                << (flags.cuda_graph ? ", CUDA graph\n" : "\n");
      results.push_back(bench::run_step_bench(options, &std::cerr));
    }
  }
  bench::print_step_table(results, std::cout);
  if (!flags.json_path.empty()) {
    bench::write_text_file(flags.json_path, bench::step_json(results).dump(2) + "\n");
    std::cout << "wrote " << flags.json_path << "\n";
  }
}

}  // namespace

void add_bench_step_command(CLI::App& app) {
  CLI::App* step = bench_app(app)->add_subcommand(
      "step", "Training-step time and peak memory of a model (compare with bench/pytorch_step.py)");
  add_print_config_flag(*step);
  auto flags = std::make_shared<StepFlags>();
  add_device_option(*step, flags->device);
  std::string names;
  for (const auto& name : models::model_names()) names += (names.empty() ? "" : ", ") + name;
  step->add_option("--model", flags->models, "model(s), comma-separated: " + names)
      ->required()
      ->delimiter(',')
      ->check(CLI::IsMember(models::model_names()));
  step->add_option("--input", flags->input, "input shape CxHxW")->capture_default_str();
  // Plain ranges: CLI11 2.1's PositiveNumber prints its bound as 0.000000 to a 309-digit number.
  step->add_option("--batch-size", flags->batch_size, "images per step")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  step->add_option("--classes", flags->classes, "output classes")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  step->add_option("--seq-len", flags->seq_len, "GPT models: tokens per window (default: the model's context)")
      ->check(CLI::Range(0, 1 << 20));
  step->add_option("--vocab", flags->vocab_size, "GPT models: vocabulary size (50304: GPT-2's, padded; 256: bytes)")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  step->add_option("--block-size", flags->block_size,
                   "GPT models: the context, i.e. positions with embeddings (default: the model's; gpt-nano 64, "
                   "gpt-mini 256, gpt2-small 1024)")
      ->check(CLI::Range(1, 1 << 20));
  add_shape_schedule_flags(*step, flags->shapes,
                           {.read_help = "its first --warmup + --steps entries are used", .images = true, .write = true});
  step->add_flag("--alloc-conf-sweep", flags->alloc_conf_sweep_list,
                 "run the same steps under each allocator setting, a fresh caching allocator each, and print one row "
                 "per setting from its memory_stats(). Alone: pytorch (PyTorch's defaults, fixed segments), "
                 "max_split_size_mb:512, roundup_power2_divisions:16, both, expandable_segments:True and sublet "
                 "(sublet's defaults for the device; on the CPU the same as PyTorch's). "
                 "--alloc-conf-sweep='A;B;...' tries that list (';' between settings; pytorch, sublet, or "
                 "SUBLET_ALLOC_CONF strings applied to PyTorch's defaults; SUBLET_ALLOC_CONF itself is not read). "
                 "CPU tensors use the same caching allocator over host memory, so the sweep runs on the CPU too")
      ->option_text("[=LIST]");
  step->add_option("--steps", flags->steps, "timed steps")->check(CLI::Range(1, 1000000))->capture_default_str();
  step->add_option("--warmup", flags->warmup, "untimed steps first")->check(CLI::Range(0, 1000000))->capture_default_str();
  step->add_flag("--small-input-stem", flags->small_input_stem,
                 "resnet18/34/50: 3x3 stride-1 stem without max-pool (for 32x32 inputs)");
  step->add_option("--seed", flags->seed, "seed of the parameters and the random batch")
      ->check(non_negative_integer())
      ->capture_default_str();
  step->add_option("--json", flags->json_path, "write the result(s) as JSON to this file (a list for several models)");
  step->add_flag("--cuda-graph", flags->cuda_graph,
                 "capture the step into a CUDA graph after the warm-up and time its replays (--device cuda)");
  CLI::Option* memory_plan =
      step->add_option("--memory-plan", flags->memory_plan,
                       "with --cuda-graph: static (the step's requests are recorded in a probe capture and served from "
                       "one arena laid out offline) or cached (the graph's pool follows the caching allocator)")
      ->check(CLI::IsMember({"static", "cached"}))
      ->capture_default_str();
  step->add_option("--plan-heuristic", flags->plan_heuristic,
                   "with --memory-plan static: place by this heuristic instead of the smallest arena's")
      ->check(CLI::IsMember(memory::static_plan_heuristics()));
  step->add_option("--plan-trace", flags->plan_trace_path,
                   "with --memory-plan static: save the captured step's requests (sublet-alloc-trace, for sublet plan)");
  step->add_option("--memory-budget", flags->memory_budget,
                   "fit the step's peak allocated memory into SIZE (6GiB) or a FRACTION of the measured peak (0.5) by "
                   "recomputing ResNet blocks in backward");
  step->add_option("--allocator", flags->allocator,
                   "tensor memory: caching (sublet's cache), raw (cudaMalloc/cudaFree per tensor), async "
                   "(cudaMallocAsync), or all of them one after the other")
      ->check(CLI::IsMember({"caching", "raw", "async", "all"}))
      ->capture_default_str();
  add_default_on_switch(*step, "cudnn-benchmark", flags->cudnn_benchmark,
                        "time every cuDNN algorithm once per shape, as torch.backends.cudnn.benchmark");
  add_default_on_switch(*step, "tf32", flags->tf32,
                        "allow TF32 tensor-core math in float32 convolutions, PyTorch's default");
  step->add_option("--cudnn-benchmark-limit", flags->cudnn_benchmark_limit,
                   "engine configurations timed per convolution shape with --cudnn-benchmark (0: all), as "
                   "torch.backends.cudnn.benchmark_limit")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  step->add_option("--alloc-trace", flags->alloc_trace_path,
                   "record every allocation and free of the run as a sublet-alloc-trace file (for sublet replay and "
                   "bench alloc --history); one model and one allocator");
  add_precision_flags(*step, flags->precision);
  step->add_flag("--nvtx", flags->nvtx,
                 "mark every module's forward and backward as NVTX ranges (Nsight Systems shows layers)");
  step->add_flag("--profile-range", flags->profile_range,
                 "mark the timed steps for `ncu --profile-from-start off` (cudaProfilerStart/Stop)");
  step->add_option("--bucket-cap-mb", flags->bucket_cap_mb, "data parallel: gradient bucket size of the all-reduce")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  auto launch = std::make_shared<LaunchFlags>();
  add_launch_flags(*step, *launch);
  step->callback([flags, memory_plan, launch, step] {
    flags->memory_plan_given = memory_plan->count() > 0;
    flags->alloc_conf_sweep = step->get_option("--alloc-conf-sweep")->count() > 0;
    // CLI11 gives a flag without a value as "true", which no setting can be: the standard list.
    if (flags->alloc_conf_sweep_list == "true") flags->alloc_conf_sweep_list.clear();
    flags->batch_size_given = step->get_option("--batch-size")->count() > 0;
    flags->seq_len_given = step->get_option("--seq-len")->count() > 0;
    flags->input_given = step->get_option("--input")->count() > 0;
    if (launch->launching()) {
      const int code = launch_workers(*launch, flags->device, "bench step", /*cpu_workers=*/false);
      if (code != 0) throw ExitWith{code};
      return;
    }
    run_bench_step(*flags);
  });
}

}  // namespace sublet::cli
