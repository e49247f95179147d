#pragma once
// What the Trainer needs of data parallel (runtime/distributed/data_parallel.h), behind one
// interface: the process group of --backend (Gloo on the CPU, NCCL or Gloo on CUDA devices),
// DataParallel's buckets and the shard sampler.
//
// The Trainer's side (train/trainer.cpp): the loader reads this rank's shard (sampler()); each
// backward runs between prepare_backward() and finish_backward(); epoch totals are summed over
// ranks before they become metrics; only rank 0 prints, writes checkpoints and metrics.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/device.h"
#include "runtime/distributed/launch_env.h"
#include "runtime/distributed/shard_sampler.h"
#include "runtime/nn/module.h"
#include "train/train_options.h"

namespace sublet::train {

class TrainerParallel {
 public:
  virtual ~TrainerParallel() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual const distributed::ShardSampler& sampler() const = 0;
  virtual void prepare_backward() = 0;
  virtual void finish_backward() = 0;
  // The host waits for the current stream's work, watching for failures and the timeout.
  virtual void synchronize() = 0;
  // In place: each value becomes its sum over all ranks.
  virtual void sum_over_ranks(std::span<double> values) = 0;
  // Every rank takes rank 0's parameters and buffers (after a resume, say).
  virtual void broadcast_model() = 0;
  virtual std::string describe() const = 0;
};

// A worker's device: the CPU for --device cpu (or auto without a GPU), else cuda:LOCAL_RANK (with
// --backend gloo and fewer GPUs than ranks on the node, cuda:(LOCAL_RANK mod GPUs): shared).
// DeviceError for another CUDA device than LOCAL_RANK's, or CUDA in a build without it.
Device worker_device(const TrainOptions& options, const distributed::LaunchEnv& env);

// Joins the group and wraps `model` (already on `device`). DistributedError when joining fails.
std::unique_ptr<TrainerParallel> make_trainer_parallel(const distributed::LaunchEnv& env, Device device,
                                                       nn::Module& model, std::int64_t dataset_size,
                                                       const TrainOptions& options);

}  // namespace sublet::train
