// The size bins must choose exactly what one ordered set keyed by (stream, size, address) would:
// checked against std::set on random operations, with sizes spread over many powers of two and
// with many blocks of one size (the bins' tree path).
#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "memory/free_block_bins.h"

using sublet::memory::Block;
using sublet::memory::FreeBlockBins;
using sublet::StreamHandle;

namespace {

using Key = std::tuple<std::uintptr_t, std::size_t, std::uintptr_t>;  // stream, size, address

Key key_of(const Block& b) {
  return {reinterpret_cast<std::uintptr_t>(b.stream), b.size, reinterpret_cast<std::uintptr_t>(b.ptr)};
}

// What the single ordered set answered: the first key >= (stream, bytes, 0) of that stream.
const Block* reference_best_fit(const std::set<Key>& set, const std::vector<Block*>& by_address,
                                StreamHandle stream, std::size_t bytes) {
  const auto s = reinterpret_cast<std::uintptr_t>(stream);
  auto it = set.lower_bound({s, bytes, 0});
  if (it == set.end() || std::get<0>(*it) != s) return nullptr;
  return by_address[std::get<2>(*it) / 512];
}

void run_random_operations(std::uint64_t seed, const std::vector<std::size_t>& size_choices, int operations) {
  std::mt19937_64 rng(seed);
  constexpr std::size_t kBlocks = 4000;
  std::deque<Block> storage(kBlocks);
  std::vector<Block*> by_address(kBlocks);
  const StreamHandle streams[] = {nullptr, reinterpret_cast<StreamHandle>(0x1000), reinterpret_cast<StreamHandle>(0x20)};
  for (std::size_t i = 0; i < kBlocks; ++i) {
    storage[i].ptr = reinterpret_cast<void*>(i * 512);  // distinct addresses, index = address / 512
    by_address[i] = &storage[i];
  }
  FreeBlockBins bins;
  std::set<Key> reference;
  std::vector<Block*> outside(by_address);  // not in the bins
  std::uniform_int_distribution<std::size_t> pick_size(0, size_choices.size() - 1);
  for (int op = 0; op < operations; ++op) {
    const StreamHandle stream = streams[rng() % 3];
    if (!outside.empty() && rng() % 2 == 0) {
      const std::size_t i = rng() % outside.size();
      Block* b = outside[i];
      outside[i] = outside.back();
      outside.pop_back();
      b->stream = stream;
      b->size = size_choices[pick_size(rng)];
      bins.insert(*b);
      reference.insert(key_of(*b));
    } else {
      const std::size_t bytes = size_choices[pick_size(rng)] + (rng() % 2 ? 0 : 512);
      const Block* expected = reference_best_fit(reference, by_address, stream, bytes);
      Block* got = bins.take_best_fit(stream, bytes, [](const Block&) { return true; });
      ASSERT_EQ(got, expected) << "op " << op << ": best fit for " << bytes << " bytes";
      if (got) {
        reference.erase(key_of(*got));
        outside.push_back(got);
      }
    }
    ASSERT_EQ(bins.size(), reference.size());
  }
  // Iteration visits every block in (stream, size, address) order.
  std::vector<Key> visited;
  bins.for_each([&](const Block& b) { visited.push_back(key_of(b)); });
  EXPECT_EQ(visited, std::vector<Key>(reference.begin(), reference.end()));
  // Erasing by identity empties the bins.
  for (const Key& k : reference) bins.erase(*by_address[std::get<2>(k) / 512]);
  EXPECT_TRUE(bins.empty());
}

}  // namespace

TEST(FreeBlockBins, BinsGrowWithSize) {
  std::size_t previous = 0;
  for (std::size_t bytes = 512; bytes < (std::size_t{1} << 40); bytes += bytes / 7 + 512) {
    const std::size_t bin = FreeBlockBins::bin_of(bytes);
    EXPECT_GE(bin, previous) << bytes;
    EXPECT_LT(bin, FreeBlockBins::kNumBins);
    previous = bin;
  }
  EXPECT_EQ(FreeBlockBins::bin_of(512), 1u);
  EXPECT_EQ(FreeBlockBins::bin_of(1024), 2u);
  EXPECT_LT(FreeBlockBins::bin_of(std::size_t{1} << 60), FreeBlockBins::kNumBins);
}

TEST(FreeBlockBins, MatchesOneOrderedSetOnRandomSizes) {
  std::mt19937_64 rng(1);
  std::vector<std::size_t> sizes;
  for (int i = 0; i < 300; ++i) sizes.push_back((1 + rng() % (std::size_t{1} << (rng() % 22))) * 512);
  run_random_operations(11, sizes, 60000);
}

TEST(FreeBlockBins, MatchesOneOrderedSetWithManyBlocksOfOneSize) {
  // Few distinct sizes: bins hold many blocks (trees), ties are broken by address.
  run_random_operations(12, {512, 1024, 4096, 4608, 2 << 20, (2 << 20) + 512}, 60000);
}

TEST(FreeBlockBins, RefusedBestFitStaysInTheBins) {
  FreeBlockBins bins;
  Block big;
  big.ptr = reinterpret_cast<void*>(0x10000);
  big.size = 64 << 20;
  bins.insert(big);
  EXPECT_EQ(bins.take_best_fit(nullptr, 4096, [](const Block& b) { return b.size < (32 << 20); }), nullptr);
  EXPECT_EQ(bins.size(), 1u);
  EXPECT_TRUE(big.cached);
  EXPECT_EQ(bins.take_best_fit(nullptr, 4096, [](const Block&) { return true; }), &big);
  EXPECT_FALSE(big.cached);
  EXPECT_TRUE(bins.empty());
}
