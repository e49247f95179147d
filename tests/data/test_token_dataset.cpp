// Token datasets: the train/validation split of text and token files, random windows (inputs and
// targets shifted by one, deterministic in (seed, step), never crossing a segment) and the
// validation walk, on real files written by the test.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/random.h"
#include "runtime/data/text_corpus.h"
#include "runtime/data/token_dataset.h"
#include "runtime/data/token_file.h"
#include "tests/data/test_support.h"
#include "tests/throw_message.h"

namespace sublet::data {
namespace {

using sublet::testing::expect_mentions;
using sublet::testing::io_error_of;
using sublet::testing::message_of;
using sublet::testing::ScratchDir;

std::vector<std::uint8_t> random_text(std::size_t size, std::uint64_t seed) {
  Random random(seed);
  std::vector<std::uint8_t> bytes(size);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(random.below(256));
  return bytes;
}

std::vector<std::int64_t> random_tokens(std::size_t count, std::uint64_t seed) {
  Random random(seed);
  std::vector<std::int64_t> tokens(count);
  for (auto& t : tokens) t = static_cast<std::int64_t>(random.below(50257));
  return tokens;
}

std::vector<std::int64_t> row(const Tensor& batch, std::int64_t r) {
  const std::vector<std::int64_t> all = batch.to_vector<std::int64_t>();
  const std::int64_t width = batch.size(1);
  return {all.begin() + r * width, all.begin() + (r + 1) * width};
}

std::vector<std::int64_t> flat(const TokenSplit& split) {
  std::vector<std::int64_t> tokens;
  for (const TokenSegment& segment : split.segments) {
    for (std::int64_t i = 0; i < segment.size(); ++i) tokens.push_back(segment[i]);
  }
  return tokens;
}

TEST(TokenDataset, TextSplitsOffTheLastTenPercent) {
  ScratchDir dir;
  const auto bytes = random_text(1000, 1);
  sublet::testing::write_raw(dir / "corpus.txt", bytes);
  const TokenDataset data = load_text_dataset(dir / "corpus.txt");
  EXPECT_EQ(data.vocab_size, 256);
  EXPECT_EQ(data.train.size(), 900);
  EXPECT_EQ(data.validation.size(), 100);
  const std::vector<std::int64_t> expected_train(bytes.begin(), bytes.begin() + 900);
  const std::vector<std::int64_t> expected_validation(bytes.begin() + 900, bytes.end());
  EXPECT_EQ(flat(data.train), expected_train);
  EXPECT_EQ(flat(data.validation), expected_validation);
  expect_mentions(data.validation.segments[0].name(), {"corpus.txt", "validation", "last 10%"});
  const TokenDataset quarter =
      load_text_dataset(dir / "corpus.txt", TokenDataOptions().validation_fraction(0.25));
  EXPECT_EQ(quarter.validation.size(), 250);
}

TEST(TokenDataset, RandomWindowsAreShiftedByOneAndDeterministic) {
  ScratchDir dir;
  const auto bytes = random_text(3000, 2);
  sublet::testing::write_raw(dir / "corpus.txt", bytes);
  const TokenDataset data = load_text_dataset(dir / "corpus.txt");
  const RandomWindowSampler sampler(data.train, TokenBatchOptions(4, 16).seed(3));
  const TokenBatch batch = sampler.batch(5);
  ASSERT_EQ(batch.inputs.sizes(), (Shape{4, 16}));
  ASSERT_EQ(batch.targets.sizes(), (Shape{4, 16}));
  EXPECT_EQ(batch.inputs.dtype(), DType::Int64);
  EXPECT_EQ(batch.targets.dtype(), DType::Int64);
  const std::vector<std::int64_t> starts = sampler.window_starts(5);
  ASSERT_EQ(starts.size(), 4u);
  for (std::int64_t r = 0; r < 4; ++r) {
    const std::int64_t s = starts[static_cast<std::size_t>(r)];
    ASSERT_TRUE(s >= 0 && s + 17 <= 2700) << s;
    EXPECT_EQ(row(batch.inputs, r), std::vector<std::int64_t>(bytes.begin() + s, bytes.begin() + s + 16));
    EXPECT_EQ(row(batch.targets, r), std::vector<std::int64_t>(bytes.begin() + s + 1, bytes.begin() + s + 17));
  }
  // The same (seed, step) from another sampler, any number of times; other steps and seeds differ.
  const RandomWindowSampler again(data.train, TokenBatchOptions(4, 16).seed(3));
  EXPECT_EQ(again.batch(5).inputs.to_vector<std::int64_t>(), batch.inputs.to_vector<std::int64_t>());
  EXPECT_EQ(again.window_starts(5), starts);
  EXPECT_NE(sampler.window_starts(6), starts);
  EXPECT_NE(RandomWindowSampler(data.train, TokenBatchOptions(4, 16).seed(4)).window_starts(5), starts);
}

TEST(TokenDataset, EveryWindowStartIsDrawnAndNoneRunsPastTheEnd) {
  ScratchDir dir;
  sublet::testing::write_raw(dir / "corpus.txt", random_text(200, 3));
  const TokenDataset data = load_text_dataset(dir / "corpus.txt");
  // 20 validation tokens, windows of 16 + 1: starts 0..3.
  const RandomWindowSampler sampler(data.validation, TokenBatchOptions(8, 16).seed(9));
  EXPECT_EQ(sampler.window_count(), 4);
  std::map<std::int64_t, int> seen;
  for (std::int64_t step = 0; step < 50; ++step) {
    for (const std::int64_t s : sampler.window_starts(step)) ++seen[s];
  }
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen.begin()->first, 0);
  EXPECT_EQ(seen.rbegin()->first, 3);
  for (const auto& [start, count] : seen) EXPECT_TRUE(count >= 60 && count <= 140) << start << ": " << count;
}

TEST(TokenDataset, LlmcShardsAreSegmentsThatWindowsNeverCross) {
  ScratchDir dir;
  const auto shard0 = random_tokens(40, 4), shard1 = random_tokens(25, 5), val = random_tokens(30, 6);
  write_llmc_token_file(dir / "tiny_train_000001.bin", shard0);
  write_llmc_token_file(dir / "tiny_train_000002.bin", shard1);
  write_llmc_token_file(dir / "tiny_val_000000.bin", val);
  const TokenDataset data = load_token_file_dataset(dir.path());
  EXPECT_EQ(data.vocab_size, 50304);
  ASSERT_EQ(data.train.segments.size(), 2u);
  EXPECT_EQ(data.train.size(), 65);
  EXPECT_EQ(flat(data.validation), val);
  const RandomWindowSampler sampler(data.train, TokenBatchOptions(16, 8).seed(1));
  EXPECT_EQ(sampler.window_count(), (40 - 8) + (25 - 8));
  std::set<std::int64_t> starts;
  for (std::int64_t step = 0; step < 40; ++step) {
    const std::vector<std::int64_t> s = sampler.window_starts(step);
    starts.insert(s.begin(), s.end());
    const TokenBatch batch = sampler.batch(step);
    for (std::int64_t r = 0; r < 16; ++r) {
      const std::int64_t start = s[static_cast<std::size_t>(r)];
      const bool first = start + 9 <= 40;
      ASSERT_TRUE(first || (start >= 40 && start + 9 <= 65)) << "window at " << start << " crosses shards";
      const auto& shard = first ? shard0 : shard1;
      const std::int64_t local = first ? start : start - 40;
      EXPECT_EQ(row(batch.targets, r),
                std::vector<std::int64_t>(shard.begin() + local + 1, shard.begin() + local + 9));
    }
  }
  EXPECT_EQ(starts.size(), static_cast<std::size_t>(sampler.window_count()));
}

TEST(TokenDataset, NanoGptFolderAndSingleBinFile) {
  ScratchDir dir;
  const auto train = random_tokens(300, 7), val = random_tokens(50, 8);
  write_nanogpt_token_file(dir / "train.bin", train);
  write_nanogpt_token_file(dir / "val.bin", val);
  const TokenDataset data = load_gpt_dataset("tokens", dir.path());
  EXPECT_EQ(flat(data.train), train);
  EXPECT_EQ(flat(data.validation), val);
  const TokenDataset single = load_token_file_dataset(dir / "train.bin");
  EXPECT_EQ(single.train.size(), 270);
  EXPECT_EQ(flat(single.validation), std::vector<std::int64_t>(train.begin() + 270, train.end()));
}

TEST(TokenDataset, ValidationWalkPredictsEveryTokenOnceInOrder) {
  ScratchDir dir;
  const auto val = random_tokens(100, 9);
  write_nanogpt_token_file(dir / "train.bin", random_tokens(100, 10));
  write_nanogpt_token_file(dir / "val.bin", val);
  const TokenDataset data = load_token_file_dataset(dir.path());
  ValidationBatches batches(data.validation, TokenBatchOptions(4, 16));
  EXPECT_EQ(batches.window_count(), 6);  // (100 - 1) / 16
  EXPECT_EQ(batches.num_batches(), 2);
  std::vector<std::int64_t> inputs, targets;
  std::vector<std::int64_t> rows;
  while (std::optional<TokenBatch> batch = batches.next()) {
    rows.push_back(batch->inputs.size(0));
    const auto i = batch->inputs.to_vector<std::int64_t>(), t = batch->targets.to_vector<std::int64_t>();
    inputs.insert(inputs.end(), i.begin(), i.end());
    targets.insert(targets.end(), t.begin(), t.end());
  }
  EXPECT_EQ(rows, (std::vector<std::int64_t>{4, 2}));
  EXPECT_EQ(inputs, std::vector<std::int64_t>(val.begin(), val.begin() + 96));
  EXPECT_EQ(targets, std::vector<std::int64_t>(val.begin() + 1, val.begin() + 97));
  EXPECT_FALSE(batches.next().has_value());
  batches.reset();
  ASSERT_TRUE(batches.next().has_value());
  ValidationBatches capped(data.validation, TokenBatchOptions(4, 16), /*max_batches=*/1);
  EXPECT_EQ(capped.num_batches(), 1);
  ASSERT_TRUE(capped.next().has_value());
  EXPECT_FALSE(capped.next().has_value());
}

TEST(TokenDataset, FileShorterThanOneWindowIsNamed) {
  ScratchDir dir;
  write_llmc_token_file(dir / "x_train.bin", random_tokens(100, 11));
  write_llmc_token_file(dir / "x_val.bin", random_tokens(16, 12));
  const TokenDataset data = load_token_file_dataset(dir.path());
  expect_mentions(io_error_of([&] { ValidationBatches b(data.validation, TokenBatchOptions(2, 16)); }),
                  {"x_val.bin", "16 tokens", "block_size + 1 = 17"});
  ValidationBatches fits(data.validation, TokenBatchOptions(2, 15));
  EXPECT_EQ(fits.window_count(), 1);
  sublet::testing::write_raw(dir / "short.txt", random_text(100, 13));
  const TokenDataset text = load_text_dataset(dir / "short.txt");
  expect_mentions(io_error_of([&] { RandomWindowSampler s(text.validation, TokenBatchOptions(2, 10)); }),
                  {"short.txt", "validation part", "10 tokens", "block_size + 1 = 11"});
}

TEST(TokenDataset, BadOptionsAndFolders) {
  ScratchDir dir;
  sublet::testing::write_raw(dir / "corpus.txt", random_text(100, 14));
  const TokenDataset data = load_text_dataset(dir / "corpus.txt");
  expect_mentions(message_of<ValueError>([&] { RandomWindowSampler s(data.train, TokenBatchOptions(0, 8)); }),
                  {"batch_size", "got 0"});
  expect_mentions(message_of<ValueError>([&] { ValidationBatches b(data.train, TokenBatchOptions(1, 8), -1); }),
                  {"max_batches", "-1"});
  for (const double bad : {0.0, 1.0, -0.5}) {
    expect_mentions(message_of<ValueError>([&] {
      load_text_dataset(dir / "corpus.txt", TokenDataOptions().validation_fraction(bad));
    }), {"validation fraction"});
  }
  expect_mentions(message_of<ValueError>([&] { load_gpt_dataset("tokens", ""); }), {"--data-dir"});
  expect_mentions(message_of<ValueError>([&] { load_gpt_dataset("images", dir.path()); }),
                  {"text or tokens", "images"});
  write_nanogpt_token_file(dir / "x_train.bin", random_tokens(100, 15));
  expect_mentions(io_error_of([&] { load_token_file_dataset(dir.path()); }),
                  {"train.bin and val.bin", "*_val*.bin", "found 1 training and 0 validation"});
  sublet::testing::write_raw(dir / "one.txt", {'x'});
  expect_mentions(io_error_of([&] { load_text_dataset(dir / "one.txt"); }), {"one.txt", "too few"});
}

TEST(TokenDataset, TextKindReadsTheGivenPathOrTheDefaultCorpus) {
  ScratchDir dir;
  sublet::testing::write_raw(dir / "corpus.txt", random_text(100, 16));
  EXPECT_EQ(load_gpt_dataset("text", dir / "corpus.txt").train.size(), 90);
  if (!std::filesystem::is_directory(default_text_corpus_dir())) {
    expect_mentions(io_error_of([&] { load_gpt_dataset("text", ""); }),
                    {"python3.11-doc", "scripts/setup.sh", "--data-dir"});
    GTEST_SKIP() << "default corpus not installed: checked the error that says how to install it";
  }
  const TokenDataset data = load_gpt_dataset("text", "");
  EXPECT_EQ(data.vocab_size, 256);
  EXPECT_TRUE(data.train.size() > 1'000'000) << data.train.size();
  EXPECT_EQ(data.validation.size(), (data.train.size() + data.validation.size()) / 10);
}

}  // namespace
}  // namespace sublet::data
