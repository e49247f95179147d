#include "runtime/distributed/shard_sampler.h"

#include <numeric>
#include <string>

#include "core/errors.h"
#include "core/random.h"

namespace sublet::distributed {

ShardSampler::ShardSampler(ShardSamplerOptions options) : options_(options) {
  if (options_.dataset_size < 0) {
    throw ValueError("shard sampler: dataset_size must be >= 0, got " + std::to_string(options_.dataset_size));
  }
  if (options_.world_size < 1) {
    throw ValueError("shard sampler: world_size must be >= 1, got " + std::to_string(options_.world_size));
  }
  if (options_.rank < 0 || options_.rank >= options_.world_size) {
    throw ValueError("shard sampler: rank must be in [0, " + std::to_string(options_.world_size - 1) + "], got " +
                     std::to_string(options_.rank));
  }
  const std::int64_t n = options_.dataset_size;
  const std::int64_t world = options_.world_size;
  num_samples_ = options_.drop_last ? n / world : (n + world - 1) / world;
}

std::vector<std::int64_t> ShardSampler::epoch_order(std::uint64_t epoch) const {
  std::vector<std::int64_t> order(static_cast<std::size_t>(options_.dataset_size));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (options_.shuffle) {
    data::Random random(data::stream_key(options_.seed, data::kEpochOrderStream, epoch));
    data::shuffle_in_place(order, random);
  }
  const auto total = static_cast<std::size_t>(total_size());
  if (order.size() > total) {
    order.resize(total);  // drop_last: the tail that would leave ranks unequal
  } else if (!order.empty()) {
    // Pad by repeating the permutation from its start, as often as needed (a dataset smaller
    // than the world wraps more than once), like DistributedSampler.
    const std::size_t n = order.size();
    for (std::size_t i = n; i < total; ++i) order.push_back(order[i - n]);
  }
  return order;
}

std::vector<std::int64_t> ShardSampler::indices(std::uint64_t epoch) const {
  const auto order = epoch_order(epoch);
  std::vector<std::int64_t> shard;
  shard.reserve(static_cast<std::size_t>(num_samples_));
  for (std::size_t i = static_cast<std::size_t>(options_.rank); i < order.size();
       i += static_cast<std::size_t>(options_.world_size)) {
    shard.push_back(order[i]);
  }
  return shard;
}

}  // namespace sublet::distributed
