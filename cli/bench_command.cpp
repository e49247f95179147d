// sublet bench alloc [--device auto|cpu|cuda|sim] [--repetitions N] [--rounds N] [--json PATH] [--svg PATH]
//                    [--history PATH] [--seed N] [--quick] [--torch-plugin PATH]
// Other benchmarks join the same `bench` parent through bench_app().
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "bench/alloc/alloc_bench.h"
#include "bench/alloc/report_json.h"
#include "bench/alloc/report_svg.h"
#include "bench/alloc/report_table.h"
#include "bench/alloc/torch_plugin_loader.h"
#include "cli/commands.h"
#include "cli/device_flag.h"
#include "cli/flag_checks.h"
#include "core/errors.h"
#include "memory/registry.h"

namespace sublet::cli {
namespace {

struct AllocFlags {
  std::string device = "auto";
  std::optional<std::size_t> repetitions;
  std::optional<std::size_t> rounds;
  std::optional<std::uint64_t> seed;
  std::string json_path;
  std::string svg_path;
  std::string history_path;
  std::string torch_plugin_path;
  bool quick = false;
};

// The torch column's plugin: --torch-plugin, else the one a -DSUBLET_WITH_LIBTORCH=ON build made
// (its build path, baked in), else none. The baked-in one is skipped, with a note, where it
// cannot serve: on the simulated device (PyTorch has none), on cuda when its LibTorch had no
// CUDA, and when it is gone (a binary copied to another machine).
std::optional<std::string> torch_plugin_for(const AllocFlags& flags, bench::BenchDevice device) {
  if (!flags.torch_plugin_path.empty()) return flags.torch_plugin_path;
#ifdef SUBLET_DEFAULT_TORCH_PLUGIN
  const std::string path = SUBLET_DEFAULT_TORCH_PLUGIN;
  if (device == bench::BenchDevice::Sim) return std::nullopt;
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    std::cerr << "note: the torch plugin this sublet was built with (" << path
              << ") is not there: no torch column; pass --torch-plugin PATH (scripts/build_torch_plugin.sh builds one)\n";
    return std::nullopt;
  }
  if (device == bench::BenchDevice::Cuda && !bench::TorchPlugin::load(path).has_cuda()) {
    std::cerr << "note: the torch plugin this sublet was built with (" << path
              << ") has no CUDA: no torch column on cuda; pass --torch-plugin PATH for one built with CUDA\n";
    return std::nullopt;
  }
  return path;
#else
  (void)device;
  return std::nullopt;
#endif
}

void run_bench_alloc(const AllocFlags& flags) {
  // A run takes minutes on a GPU: say that an output cannot be written before, not after.
  check_output_file("--json", flags.json_path);
  check_output_file("--svg", flags.svg_path);
  const bench::BenchDevice device = flags.device == "auto" ? (memory::cuda_available() ? bench::BenchDevice::Cuda
                                                                                        : bench::BenchDevice::Cpu)
                                                           : bench::parse_bench_device(flags.device);
  bench::AllocBenchOptions options = flags.quick ? bench::AllocBenchOptions::quick_options(device) : bench::AllocBenchOptions{};
  options.device = device;
  if (flags.repetitions) options.repetitions = *flags.repetitions;
  if (flags.rounds) options.rounds = *flags.rounds;
  if (flags.seed) options.seed = *flags.seed;
  if (!flags.history_path.empty()) options.history_path = flags.history_path;
  options.torch_plugin_path = torch_plugin_for(flags, device);

  const bench::AllocBenchResult result = bench::run_alloc_bench(options, &std::cerr);
  bench::print_report(result, std::cout);
  if (!flags.json_path.empty()) {
    bench::write_text_file(flags.json_path, bench::report_json(result).dump(2) + "\n");
    std::cout << "wrote " << flags.json_path << "\n";
  }
  if (!flags.svg_path.empty()) {
    bench::write_text_file(flags.svg_path, bench::report_svg(result));
    std::cout << "wrote " << flags.svg_path << "\n";
  }
}

}  // namespace

CLI::App* bench_app(CLI::App& app) {
  const auto existing = app.get_subcommands([](CLI::App* sub) { return sub->get_name() == "bench"; });
  if (!existing.empty()) return existing.front();
  CLI::App* bench = app.add_subcommand(
      "bench", "Benchmarks, each a table and optionally JSON: alloc (allocator latency), step (training-step time, memory)");
  bench->require_subcommand(1);
  return bench;
}

void add_bench_alloc_command(CLI::App& app) {
  CLI::App* alloc = bench_app(app)->add_subcommand(
      "alloc", "Allocate+free latency of sublet's caching allocator against cudaMalloc, cudaMallocAsync, "
               "PyTorch's allocator (with --torch-plugin) or malloc");
  auto flags = std::make_shared<AllocFlags>();
  // cuda is cuda:0; sim: a simulated device of 141 GiB (no driver calls: the allocator's own cost).
  add_device_option(*alloc, flags->device, {.cuda_index = false, .extra = {"sim"}});
  alloc->add_option("--repetitions", flags->repetitions,
                    "timed pairs per cell, at most (default 100000; 200 with --quick; up to 10000000, since the churn "
                    "row's sequence is laid out beforehand, 16 bytes a pair)")
      ->check(CLI::Range(std::size_t{1}, bench::kMaxRepetitions));
  alloc->add_option("--rounds", flags->rounds,
                    "run every cell this many times, spread over the run, and report the median of their medians "
                    "(default 5; 1 with --quick)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1000}));
  alloc->add_option("--json", flags->json_path, "write every row as JSON to this file");
  alloc->add_option("--svg", flags->svg_path, "write a log-scale latency-by-size plot to this file");
  alloc->add_option("--history", flags->history_path,
                    "replay this recorded allocation history (sublet-alloc-trace JSON); the replay row is skipped without it")
      ->check(CLI::ExistingFile);
  alloc->add_option("--seed", flags->seed, "seed of the churn workload (default 7)")->check(non_negative_integer());
  alloc->add_flag("--quick", flags->quick, "tiny counts for a CI smoke run");
  alloc->add_option("--torch-plugin", flags->torch_plugin_path,
                    "add the torch column (PyTorch's allocator and at::empty) from this plugin, built against the "
                    "installed PyTorch by scripts/build_torch_plugin.sh PATH"
#ifdef SUBLET_DEFAULT_TORCH_PLUGIN
                    " (default: " SUBLET_DEFAULT_TORCH_PLUGIN ", built with this sublet)"
#endif
  );
  alloc->callback([flags] { run_bench_alloc(*flags); });
}

}  // namespace sublet::cli
