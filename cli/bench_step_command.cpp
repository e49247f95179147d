// sublet bench step [--device cpu|cuda|auto] --model M[,M...] [--input CxHxW] [--batch-size B]
//                   [--classes K] [--steps N] [--warmup W] [--small-input-stem] [--seed S] [--json PATH]
//                   [--cuda-graph] [--allocator caching|raw|async|all] [--precision fp32|bf16|fp16] [--channels-last]
//                   [--nproc-per-node N [--bucket-cap-mb MB] ...]   (data parallel: cli/bench_step_parallel.h)
//                   [--seq-len N] [--vocab V]   (GPT models: token windows instead of images)
// Times training steps of a model (bench/step); bench/pytorch_step.py takes the same flags.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "bench/alloc/report_json.h"
#include "bench/step/step_bench.h"
#include "bench/step/step_report.h"
#include "cli/bench_step_parallel.h"
#include "cli/commands.h"
#include "cli/config_report.h"
#include "cli/data_parallel_launch.h"
#include "cli/flag_checks.h"
#include "cli/run_files.h"
#include "cli/precision_flags.h"
#include "ops/conv_settings.h"
#include "core/errors.h"
#include "analysis/recompute_plan.h"
#include "analysis/static_plan.h"
#include "memory/registry.h"
#include "models/registry.h"
#include "runtime/nn/module_ranges.h"

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
};

// "all": every allocator the device supports (the driver's async pool exists only on CUDA).
std::vector<memory::AllocatorKind> allocator_kinds(const std::string& text, Device device) {
  using memory::AllocatorKind;
  if (text != "all") return {memory::parse_allocator_kind(text)};
  if (device.is_cuda()) return {AllocatorKind::Caching, AllocatorKind::Raw, AllocatorKind::Async};
  return {AllocatorKind::Caching, AllocatorKind::Raw};
}

// One clear message instead of a failure deep inside the first allocation.
Device resolve_device(const std::string& name) {
  if (name == "cpu") return Device::cpu();
  if (name == "auto") return memory::cuda_available() ? Device::cuda(0) : Device::cpu();
  if (!memory::cuda_built()) {
    throw DeviceError("bench step --device cuda: this sublet was built without CUDA "
                      "(configure with -DSUBLET_WITH_CUDA=ON on a machine with a CUDA toolkit), use --device cpu");
  }
  if (!memory::cuda_available()) throw DeviceError("bench step --device cuda: no usable CUDA device found");
  return Device::cuda(0);
}

void run_bench_step(const StepFlags& flags) {
  check_output_file("--json", flags.json_path);
  check_output_file("--alloc-trace", flags.alloc_trace_path);
  bench::StepBenchOptions options;
  options.device = resolve_device(flags.device);
  // Before the model is built, not after.
  if (flags.cuda_graph && !options.device.is_cuda())
    throw DeviceError("bench step --cuda-graph: needs --device cuda (CUDA graphs exist only on the GPU), this run is on " +
                      options.device.str());
  options.input = bench::parse_input_shape(flags.input);
  options.batch_size = flags.batch_size;
  options.num_classes = flags.classes;
  options.seq_len = flags.seq_len;
  options.vocab_size = flags.vocab_size;
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
  RunFiles()
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
  step->add_option("--device", flags->device, "cpu, cuda, or auto (cuda when a GPU is present, else cpu)")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->capture_default_str();
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
  step->callback([flags, memory_plan, launch] {
    flags->memory_plan_given = memory_plan->count() > 0;
    if (launch->launching()) {
      const int code = launch_workers(*launch, flags->device, "bench step", /*cpu_workers=*/false);
      if (code != 0) throw ExitWith{code};
      return;
    }
    run_bench_step(*flags);
  });
}

}  // namespace sublet::cli
