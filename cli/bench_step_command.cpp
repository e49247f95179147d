// sublet bench step [--device cpu|cuda|auto] --model M[,M...] [--input CxHxW] [--batch-size B]
//                   [--classes K] [--steps N] [--warmup W] [--small-input-stem] [--seed S] [--json PATH]
// Times training steps of a model (bench/step); bench/pytorch_step.py takes the same flags.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "bench/alloc/report_json.h"
#include "bench/step/step_bench.h"
#include "bench/step/step_report.h"
#include "cli/commands.h"
#include "memory/errors.h"
#include "memory/registry.h"
#include "models/registry.h"

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
};

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
  if (!flags.json_path.empty()) {
    const auto parent = std::filesystem::absolute(flags.json_path).parent_path();
    if (!std::filesystem::is_directory(parent))
      throw IoError("--json " + flags.json_path + ": the directory " + parent.string() + " does not exist");
  }
  bench::StepBenchOptions options;
  options.device = resolve_device(flags.device);
  options.input = bench::parse_input_shape(flags.input);
  options.batch_size = flags.batch_size;
  options.num_classes = flags.classes;
  options.steps = flags.steps;
  options.warmup = flags.warmup;
  options.small_input_stem = flags.small_input_stem;
  options.seed = flags.seed;
  std::vector<bench::StepBenchResult> results;
  for (const auto& model : flags.models) {
    options.model = model;
    results.push_back(bench::run_step_bench(options, &std::cerr));
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
  step->add_option("--batch-size", flags->batch_size, "images per step")->check(CLI::PositiveNumber)->capture_default_str();
  step->add_option("--classes", flags->classes, "output classes")->check(CLI::PositiveNumber)->capture_default_str();
  step->add_option("--steps", flags->steps, "timed steps")->check(CLI::PositiveNumber)->capture_default_str();
  step->add_option("--warmup", flags->warmup, "untimed steps first")->check(CLI::NonNegativeNumber)->capture_default_str();
  step->add_flag("--small-input-stem", flags->small_input_stem,
                 "resnet18/34/50: 3x3 stride-1 stem without max-pool (for 32x32 inputs)");
  step->add_option("--seed", flags->seed, "seed of the parameters and the random batch")->capture_default_str();
  step->add_option("--json", flags->json_path, "write the result(s) as JSON to this file (a list for several models)");
  step->callback([flags] { run_bench_step(*flags); });
}

}  // namespace sublet::cli
