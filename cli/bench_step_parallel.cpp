#include "cli/bench_step_parallel.h"

#include <fmt/format.h>

#include <ostream>

#include "bench/step/step_report.h"
#include "core/errors.h"
#include "core/format_bytes.h"
#include "memory/current_stream.h"
#include "memory/registry.h"
#include "runtime/distributed/launch_env.h"
#ifdef SUBLET_HAVE_CUDA
#include "runtime/distributed/data_parallel.h"
#include "runtime/distributed/nccl_process_group.h"
#endif

namespace sublet::cli {

#ifdef SUBLET_HAVE_CUDA
namespace {

class StepDataParallel final : public bench::StepParallel {
 public:
  StepDataParallel(distributed::ProcessGroup& group, nn::Module& model, std::int64_t bucket_cap_mb)
      : dp_(group, model.parameters(), model.buffers(),
            distributed::BucketOptions{.cap_bytes = static_cast<std::size_t>(bucket_cap_mb) * 1024 * 1024}) {}
  void prepare_backward() override { dp_.prepare_backward(); }
  void finish_backward() override { dp_.finish_backward(); }

 private:
  distributed::DataParallel dp_;
};

}  // namespace

std::optional<DataParallelStepReport> run_data_parallel_step(bench::StepBenchOptions options, std::int64_t bucket_cap_mb,
                                                             std::ostream* progress) {
  const distributed::LaunchEnv env = distributed::launch_env_from_process();
  options.device = Device::cuda(env.local_rank);
  DataParallelStepReport report;
  report.world_size = env.world_size;
  report.bucket_cap_mb = bucket_cap_mb;
  if (env.rank == 0) {
    if (progress) *progress << "bench step: the single-GPU baseline on " << options.device.str() << "\n";
    report.single = bench::run_step_bench(options, progress);
    report.single_gpu_img_per_s = report.single.img_per_s;
    memory::replace_allocator(options.device, memory::make_allocator(options.device, options.allocator));
  }
  distributed::NcclProcessGroup group(env, options.device, {});
  options.parallel = [&group, bucket_cap_mb](nn::Module& model) {
    return std::make_unique<StepDataParallel>(group, model, bucket_cap_mb);
  };
  report.parallel = bench::run_step_bench(options, progress);
  std::vector<double> per_rank(static_cast<std::size_t>(env.world_size), 0.0);
  per_rank[static_cast<std::size_t>(env.rank)] = report.parallel.img_per_s;
  Tensor gathered = Tensor::from_vector(per_rank, {env.world_size}).to(options.device);
  group.all_reduce(gathered.data_ptr(), per_rank.size(), DType::Float64, distributed::ReduceOp::Sum,
                   memory::current_stream(options.device));
  group.synchronize(memory::current_stream(options.device));
  if (env.rank != 0) return std::nullopt;
  report.per_rank_img_per_s = gathered.to(Device::cpu()).to_vector<double>();
  for (double v : report.per_rank_img_per_s) report.total_img_per_s += v;
  report.scaling_efficiency = report.total_img_per_s / (env.world_size * report.single_gpu_img_per_s);
  return report;
}
#else
std::optional<DataParallelStepReport> run_data_parallel_step(bench::StepBenchOptions, std::int64_t, std::ostream*) {
  throw DeviceError("bench step --nproc-per-node: data parallel needs CUDA devices, and this sublet was built without CUDA");
}
#endif

void print_data_parallel_table(const DataParallelStepReport& r, std::ostream& out) {
  out << fmt::format("{:<10} {:>5} {:>10} {:>14} {:>12} {:>12} {:>10} {:>11} {:>11}\n", "model", "world", "batch/GPU",
                     "img/s per GPU", "total img/s", "1-GPU img/s", "efficiency", "peak alloc", "peak rsvd");
  out << fmt::format("{:<10} {:>5} {:>10} {:>14.1f} {:>12.1f} {:>12.1f} {:>9.1f}% {:>11} {:>11}\n",
                     r.parallel.options.model, r.world_size, r.parallel.options.batch_size,
                     r.total_img_per_s / r.world_size, r.total_img_per_s, r.single_gpu_img_per_s,
                     100.0 * r.scaling_efficiency,
                     format_bytes(static_cast<std::int64_t>(r.parallel.peak_allocated_bytes)),
                     format_bytes(static_cast<std::int64_t>(r.parallel.peak_reserved_bytes)));
}

nlohmann::json data_parallel_json(const DataParallelStepReport& r) {
  nlohmann::json j;
  j["world_size"] = r.world_size;
  j["bucket_cap_mb"] = r.bucket_cap_mb;
  j["per_rank_img_per_s"] = r.per_rank_img_per_s;
  j["total_img_per_s"] = r.total_img_per_s;
  j["single_gpu_img_per_s"] = r.single_gpu_img_per_s;
  j["scaling_efficiency"] = r.scaling_efficiency;
  j["single_gpu"] = bench::step_json(r.single);
  j["data_parallel_rank0"] = bench::step_json(r.parallel);
  return j;
}

}  // namespace sublet::cli
