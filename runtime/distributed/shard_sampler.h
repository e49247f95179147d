#pragma once
// Which dataset indices each rank reads in an epoch: PyTorch's DistributedSampler semantics.
// Every rank computes the same permutation from (seed, epoch), pads or trims it to a multiple
// of the world size, and takes every world_size-th index starting at its rank, so the shards
// are disjoint (apart from the padding) and cover the dataset. Nothing depends on earlier
// calls: a restarted job gets the same shards for the same epoch.
//
// The permutation is the one data::DataLoader::epoch_order uses (core/random.h), not
// torch.randperm's: with one rank, the data-parallel path reads exactly the plain path's order.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sublet::distributed {

struct ShardSamplerOptions {
  std::int64_t dataset_size = 0;
  int world_size = 1;
  int rank = 0;
  bool shuffle = true;
  std::uint64_t seed = 0;
  // false: pad with the permutation's first indices (wrapping around it as often as needed) up
  // to a multiple of world_size, so every rank sees the same number of samples and some
  // samples are seen twice per epoch. true: drop the permutation's tail instead.
  bool drop_last = false;
};

class ShardSampler {
 public:
  // Throws ValueError for dataset_size < 0, world_size < 1 or rank outside [0, world_size).
  explicit ShardSampler(ShardSamplerOptions options);

  // Samples per rank and epoch: ceil(n / world) without drop_last, floor(n / world) with it.
  std::int64_t num_samples() const { return num_samples_; }
  // num_samples * world_size: the samples all ranks read together in an epoch.
  std::int64_t total_size() const { return num_samples_ * options_.world_size; }

  // This rank's dataset indices of `epoch`, in reading order.
  std::vector<std::int64_t> indices(std::uint64_t epoch) const;
  // The whole epoch's order before sharding (padded or trimmed to total_size()); rank r's
  // shard is elements r, r + world_size, ... of it.
  std::vector<std::int64_t> epoch_order(std::uint64_t epoch) const;

  const ShardSamplerOptions& options() const { return options_; }

 private:
  ShardSamplerOptions options_;
  std::int64_t num_samples_ = 0;
};

}  // namespace sublet::distributed
