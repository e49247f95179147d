#include "train/trainer_data_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/errors.h"
#include "memory/current_stream.h"
#include "memory/registry.h"
#include "runtime/factories.h"
#include "runtime/nn/sync_batch_norm.h"
#include "runtime/distributed/data_parallel.h"

namespace sublet::train {

Device worker_device(const TrainOptions& options, const distributed::LaunchEnv& env) {
  const std::string& d = options.device;
  if (d == "cpu" || (d == "auto" && !memory::cuda_available())) return Device::cpu();
  if (!memory::cuda_built())
    throw DeviceError("--device " + d + ": this sublet was built without CUDA; use --device cpu (Gloo between processes)");
  // One GPU per rank; Gloo may also share GPUs between a node's ranks (two processes on one
  // GPU), NCCL refuses that.
  const int gpus = memory::cuda_device_count();
  const bool shares = gpus > 0 && env.local_rank >= gpus;
  if (shares && distributed::parse_backend(options.backend, Device::cuda(0)) == distributed::Backend::Nccl)
    throw DeviceError(fmt::format("LOCAL_RANK {} needs a GPU of its own with NCCL, and this node has {}; start at most {} "
                                  "worker{} per node, or share GPUs with --backend gloo",
                                  env.local_rank, gpus, gpus, gpus == 1 ? "" : "s"));
  const Device device = Device::cuda(shares ? env.local_rank % gpus : env.local_rank);
  if (d != "auto" && d != "cuda" && d != device.str())
    throw DeviceError(fmt::format("--device {}: a data-parallel worker uses the GPU of its LOCAL_RANK, {} here; drop "
                                  "--device or pass cuda",
                                  d, device.str()));
  return device;
}

namespace {

class GroupTrainerParallel final : public TrainerParallel {
 public:
  GroupTrainerParallel(const distributed::LaunchEnv& env, Device device, nn::Module& model, std::int64_t dataset_size,
                       const TrainOptions& options)
      : model_(model),
        group_(distributed::make_process_group(distributed::parse_backend(options.backend, device), env, device,
                                               group_options(options))),
        sampler_({.dataset_size = dataset_size,
                  .world_size = env.world_size,
                  .rank = env.rank,
                  .shuffle = true,
                  .seed = options.seed,
                  .drop_last = false}) {
    distributed::BucketOptions buckets;
    buckets.cap_bytes = static_cast<std::size_t>(options.bucket_cap_mb * 1024.0 * 1024.0);
    // The small first bucket (1 MiB) exists to start communicating early; under a smaller cap
    // every bucket is small already.
    buckets.first_bucket_cap_bytes = std::min(buckets.first_bucket_cap_bytes, buckets.cap_bytes);
    dp_ = std::make_unique<distributed::DataParallel>(*group_, model.parameters(), model.buffers(), buckets);
    if (options.sync_batch_norm) {
      sync_batch_norm_.emplace([this](Tensor& values) {
        group_->all_reduce(values.data_ptr(), static_cast<std::size_t>(values.numel()), values.dtype(),
                           distributed::ReduceOp::Sum, memory::current_stream(group_->device()));
      });
    }
  }

  int rank() const override { return group_->rank(); }
  int world_size() const override { return group_->world_size(); }
  const distributed::ShardSampler& sampler() const override { return sampler_; }
  void prepare_backward() override { dp_->prepare_backward(); }
  void finish_backward() override { dp_->finish_backward(); }
  void synchronize() override { group_->synchronize(memory::current_stream(group_->device())); }

  void sum_over_ranks(std::span<double> values) override {
    std::vector<double> host(values.begin(), values.end());
    Tensor device_values = Tensor::from_vector(host, {static_cast<std::int64_t>(host.size())}).to(group_->device());
    group_->all_reduce(device_values.data_ptr(), host.size(), DType::Float64, distributed::ReduceOp::Sum,
                       memory::current_stream(group_->device()));
    synchronize();
    host = device_values.to(Device::cpu()).to_vector<double>();
    std::copy(host.begin(), host.end(), values.begin());
  }

  void broadcast_model() override { dp_->broadcast_from_rank0(model_.parameters(), model_.buffers()); }

  std::string describe() const override {
    return fmt::format("data parallel ({}): rank {} of {} on {}, {} gradient bucket{} ({:.1f} MiB), {} images per rank "
                       "and epoch, batch norm statistics {}",
                       distributed::backend_name(group_->backend()), rank(), world_size(), group_->device().str(),
                       dp_->plan().buckets.size(), dp_->plan().buckets.size() == 1 ? "" : "s",
                       static_cast<double>(dp_->bucket_bytes()) / (1024.0 * 1024.0), sampler_.num_samples(),
                       sync_batch_norm_ ? "over all ranks" : "per rank");
  }

 private:
  static distributed::ProcessGroupOptions group_options(const TrainOptions& options) {
    const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(options.dist_timeout_s * 1000.0));
    return {.store_timeout = timeout, .collective_timeout = timeout};
  }

  nn::Module& model_;
  std::unique_ptr<distributed::ProcessGroup> group_;
  distributed::ShardSampler sampler_;
  std::unique_ptr<distributed::DataParallel> dp_;
  std::optional<nn::SyncBatchNormScope> sync_batch_norm_;  // --sync-batch-norm
};

}  // namespace

std::unique_ptr<TrainerParallel> make_trainer_parallel(const distributed::LaunchEnv& env, Device device,
                                                       nn::Module& model, std::int64_t dataset_size,
                                                       const TrainOptions& options) {
  return std::make_unique<GroupTrainerParallel>(env, device, model, dataset_size, options);
}

}  // namespace sublet::train
