#pragma once
// `sublet bench step --nproc-per-node N`, a worker's side: rank 0 first times the plain step on
// its GPU alone (the single-GPU baseline; the other ranks wait in the rendezvous), then every
// rank times data-parallel steps (DataParallel around each backward, a batch of B per rank),
// and rank 0 gathers every rank's img/s: per-GPU and total img/s, and the scaling efficiency
// total / (world size x single-GPU img/s). CUDA builds only (DeviceError otherwise).
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/step/step_bench.h"

namespace sublet::cli {

struct DataParallelStepReport {
  int world_size = 1;
  std::int64_t bucket_cap_mb = 25;
  std::vector<double> per_rank_img_per_s;
  double total_img_per_s = 0;
  double single_gpu_img_per_s = 0;
  double scaling_efficiency = 0;  // total / (world_size * single)
  bench::StepBenchResult single;    // rank 0's single-GPU run
  bench::StepBenchResult parallel;  // rank 0's data-parallel run
};

// Runs the worker's part; the report on rank 0, nullopt on the others.
std::optional<DataParallelStepReport> run_data_parallel_step(bench::StepBenchOptions options, std::int64_t bucket_cap_mb,
                                                             std::ostream* progress);

void print_data_parallel_table(const DataParallelStepReport& report, std::ostream& out);
nlohmann::json data_parallel_json(const DataParallelStepReport& report);

}  // namespace sublet::cli
