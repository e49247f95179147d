// sublet bench alloc [--device cuda|cpu|sim] [--repetitions N] [--json PATH] [--svg PATH]
//                    [--history PATH] [--seed N] [--quick]
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
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "memory/errors.h"
#include "memory/registry.h"

namespace sublet::cli {
namespace {

struct AllocFlags {
  std::string device = "auto";
  std::optional<std::size_t> repetitions;
  std::optional<std::uint64_t> seed;
  std::string json_path;
  std::string svg_path;
  std::string history_path;
  bool quick = false;
};

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
  if (flags.seed) options.seed = *flags.seed;
  if (!flags.history_path.empty()) options.history_path = flags.history_path;

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
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks: each prints a table and can write JSON");
  bench->require_subcommand(1);
  return bench;
}

void add_bench_alloc_command(CLI::App& app) {
  CLI::App* alloc = bench_app(app)->add_subcommand(
      "alloc", "Allocate+free latency of sublet's caching allocator against cudaMalloc, cudaMallocAsync, "
               "PyTorch's allocator (when built with LibTorch) or malloc");
  auto flags = std::make_shared<AllocFlags>();
  alloc->add_option("--device", flags->device, "cuda, cpu, sim, or auto (cuda when a GPU is present, else cpu)")
      ->check(CLI::IsMember({"auto", "cuda", "cpu", "sim"}))
      ->capture_default_str();
  alloc->add_option("--repetitions", flags->repetitions, "timed pairs per cell, at most (default 100000; 200 with --quick)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 40));
  alloc->add_option("--json", flags->json_path, "write every row as JSON to this file");
  alloc->add_option("--svg", flags->svg_path, "write a log-scale latency-by-size plot to this file");
  alloc->add_option("--history", flags->history_path,
                    "replay this recorded allocation history (sublet-alloc-trace JSON); the replay row is skipped without it")
      ->check(CLI::ExistingFile);
  alloc->add_option("--seed", flags->seed, "seed of the churn workload (default 7)")->check(non_negative_integer());
  alloc->add_flag("--quick", flags->quick, "tiny counts for a CI smoke run");
  alloc->callback([flags] { run_bench_alloc(*flags); });
}

}  // namespace sublet::cli
