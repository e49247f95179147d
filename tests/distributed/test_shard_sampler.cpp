// DistributedSampler semantics: disjoint shards of one permutation that together cover the
// dataset, padded by wrapping or trimmed with drop_last, the same after a restart.
#include "runtime/distributed/shard_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "core/errors.h"
#include "core/random.h"

namespace {

using namespace sublet::distributed;

std::vector<std::vector<std::int64_t>> all_shards(ShardSamplerOptions options, std::uint64_t epoch) {
  std::vector<std::vector<std::int64_t>> shards;
  for (int r = 0; r < options.world_size; ++r) {
    options.rank = r;
    shards.push_back(ShardSampler(options).indices(epoch));
  }
  return shards;
}

TEST(ShardSampler, ShardsAreDisjointAndCoverTheDatasetWhenItDivides) {
  const ShardSamplerOptions options{.dataset_size = 1000, .world_size = 4, .rank = 0, .shuffle = true, .seed = 7};
  const auto shards = all_shards(options, 3);
  std::vector<std::int64_t> together;
  for (const auto& shard : shards) {
    EXPECT_EQ(shard.size(), 250u);
    together.insert(together.end(), shard.begin(), shard.end());
  }
  std::sort(together.begin(), together.end());
  std::vector<std::int64_t> expected(1000);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(together, expected);  // each index exactly once
}

TEST(ShardSampler, PaddingWrapsToTheStartOfThePermutation) {
  // 10 samples over 4 ranks: 3 each, the last 2 positions repeat the permutation's first 2.
  const ShardSamplerOptions options{.dataset_size = 10, .world_size = 4, .rank = 0, .seed = 1};
  const ShardSampler sampler(options);
  EXPECT_EQ(sampler.num_samples(), 3);
  EXPECT_EQ(sampler.total_size(), 12);
  const auto order = sampler.epoch_order(0);
  ASSERT_EQ(order.size(), 12u);
  EXPECT_EQ(order[10], order[0]);
  EXPECT_EQ(order[11], order[1]);
  EXPECT_EQ(std::set<std::int64_t>(order.begin(), order.end()).size(), 10u);  // all covered
  const auto shards = all_shards(options, 0);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(shards[static_cast<std::size_t>(r)].size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(shards[static_cast<std::size_t>(r)][i], order[i * 4 + static_cast<std::size_t>(r)]);
  }
}

TEST(ShardSampler, DatasetSmallerThanTheWorldWrapsMoreThanOnce) {
  const ShardSamplerOptions options{.dataset_size = 3, .world_size = 8, .rank = 0, .shuffle = false};
  const auto order = ShardSampler(options).epoch_order(0);
  EXPECT_EQ(order, (std::vector<std::int64_t>{0, 1, 2, 0, 1, 2, 0, 1}));
  const auto shards = all_shards(options, 0);
  EXPECT_EQ(shards[7], (std::vector<std::int64_t>{1}));
}

TEST(ShardSampler, DropLastTrimsTheTailAndKeepsShardsDisjoint) {
  const ShardSamplerOptions options{.dataset_size = 10, .world_size = 4, .rank = 0, .seed = 1, .drop_last = true};
  const ShardSampler sampler(options);
  EXPECT_EQ(sampler.num_samples(), 2);
  const auto shards = all_shards(options, 5);
  std::set<std::int64_t> seen;
  for (const auto& shard : shards) {
    EXPECT_EQ(shard.size(), 2u);
    for (const auto index : shard) EXPECT_TRUE(seen.insert(index).second) << index << " read twice";
  }
  EXPECT_EQ(seen.size(), 8u);
  // Trimmed from the same permutation the padded variant uses.
  ShardSamplerOptions padded = options;
  padded.drop_last = false;
  const auto full = ShardSampler(padded).epoch_order(5);
  const auto trimmed = sampler.epoch_order(5);
  EXPECT_TRUE(std::equal(trimmed.begin(), trimmed.end(), full.begin()));
  // Fewer samples than ranks: nothing to read.
  EXPECT_EQ(ShardSampler({.dataset_size = 3, .world_size = 4, .rank = 0, .drop_last = true}).indices(0).size(), 0u);
}

TEST(ShardSampler, SameSeedAndEpochGiveTheSameShardsAfterARestart) {
  const ShardSamplerOptions options{.dataset_size = 997, .world_size = 3, .rank = 2, .seed = 42};
  const auto before = ShardSampler(options).indices(4);
  // A fresh sampler (a restarted process), asked for other epochs first, agrees.
  const ShardSampler restarted(options);
  restarted.indices(0);
  restarted.indices(9);
  EXPECT_EQ(restarted.indices(4), before);
  EXPECT_NE(restarted.indices(5), before);  // epochs differ
  ShardSamplerOptions other_seed = options;
  other_seed.seed = 43;
  EXPECT_NE(ShardSampler(other_seed).indices(4), before);
}

TEST(ShardSampler, OneRankReadsTheDataLoadersOrder) {
  // With world size 1 the data-parallel path must read what the plain loader reads:
  // DataLoader::epoch_order shuffles iota with stream_key(seed, kEpochOrderStream, epoch).
  const ShardSamplerOptions options{.dataset_size = 100, .world_size = 1, .rank = 0, .seed = 11};
  std::vector<std::int64_t> loader_order(100);
  std::iota(loader_order.begin(), loader_order.end(), 0);
  sublet::data::Random random(sublet::data::stream_key(11, sublet::data::kEpochOrderStream, 2));
  sublet::data::shuffle_in_place(loader_order, random);
  EXPECT_EQ(ShardSampler(options).indices(2), loader_order);
}

TEST(ShardSampler, WithoutShuffleShardsAreStrided) {
  const auto shards = all_shards({.dataset_size = 8, .world_size = 2, .rank = 0, .shuffle = false}, 0);
  EXPECT_EQ(shards[0], (std::vector<std::int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(shards[1], (std::vector<std::int64_t>{1, 3, 5, 7}));
}

TEST(ShardSampler, BadOptionsAreRefused) {
  EXPECT_THROW(ShardSampler({.dataset_size = 10, .world_size = 2, .rank = 2}), sublet::ValueError);
  EXPECT_THROW(ShardSampler({.dataset_size = 10, .world_size = 2, .rank = -1}), sublet::ValueError);
  EXPECT_THROW(ShardSampler({.dataset_size = 10, .world_size = 0, .rank = 0}), sublet::ValueError);
  EXPECT_THROW(ShardSampler({.dataset_size = -1, .world_size = 1, .rank = 0}), sublet::ValueError);
  EXPECT_EQ(ShardSampler({.dataset_size = 0, .world_size = 2, .rank = 1}).indices(0).size(), 0u);
}

}  // namespace
