// llm.c and nanoGPT token files: both layouts read back what the writers wrote (told apart by the
// magic), and every kind of bad file gets an IoError naming the file and what was expected.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>

#include "core/random.h"
#include "runtime/data/token_file.h"
#include "tests/data/test_support.h"
#include "tests/throw_message.h"

namespace sublet::data {
namespace {

using sublet::testing::expect_mentions;
using sublet::testing::io_error_of;
using sublet::testing::ScratchDir;
using sublet::testing::write_raw;

std::vector<std::int64_t> random_tokens(std::size_t count, std::uint64_t seed,
                                        std::uint64_t vocab = 50257) {
  Random random(seed);
  std::vector<std::int64_t> tokens(count);
  for (auto& token : tokens) token = static_cast<std::int64_t>(random.below(vocab));
  return tokens;
}

std::vector<std::int64_t> as_int64(std::span<const std::uint16_t> tokens) {
  return {tokens.begin(), tokens.end()};
}

// An llm.c file written byte by byte, independent of the writer under test.
std::vector<std::uint8_t> llmc_bytes(std::int32_t magic, std::int32_t version, std::int32_t count,
                                     const std::vector<std::uint16_t>& tokens) {
  std::vector<std::uint8_t> bytes(1024, 0);
  const std::int32_t header[3] = {magic, version, count};
  std::memcpy(bytes.data(), header, sizeof(header));
  for (const std::uint16_t token : tokens) {
    bytes.push_back(static_cast<std::uint8_t>(token & 0xFF));
    bytes.push_back(static_cast<std::uint8_t>(token >> 8));
  }
  return bytes;
}

TEST(TokenFile, LlmcRoundTrip) {
  ScratchDir dir;
  const auto tokens = random_tokens(1001, 1);
  write_llmc_token_file(dir / "x_train.bin", tokens);
  const TokenFile file(dir / "x_train.bin");
  EXPECT_EQ(file.layout(), TokenFileLayout::llmc);
  EXPECT_EQ(file.size(), 1001);
  EXPECT_EQ(as_int64(file.tokens()), tokens);
  EXPECT_EQ(sublet::testing::read_raw(dir / "x_train.bin").size(), 1024u + 2 * 1001);
}

TEST(TokenFile, NanoGptRoundTrip) {
  ScratchDir dir;
  const auto tokens = random_tokens(777, 2);
  write_nanogpt_token_file(dir / "train.bin", tokens);
  const TokenFile file(dir / "train.bin");
  EXPECT_EQ(file.layout(), TokenFileLayout::nanogpt);
  EXPECT_EQ(as_int64(file.tokens()), tokens);
  EXPECT_EQ(sublet::testing::read_raw(dir / "train.bin").size(), 2u * 777);
}

TEST(TokenFile, ReadsHandWrittenLlmcFileLittleEndian) {
  ScratchDir dir;
  write_raw(dir / "a.bin", llmc_bytes(kLlmcTokenMagic, 1, 3, {50256, 1, 0x1234}));
  const TokenFile file(dir / "a.bin");
  EXPECT_EQ(file.layout(), TokenFileLayout::llmc);
  EXPECT_EQ(as_int64(file.tokens()), (std::vector<std::int64_t>{50256, 1, 0x1234}));
}

TEST(TokenFile, SmallNanoGptFilesAreNotMistakenForLlmc) {
  ScratchDir dir;
  write_raw(dir / "two.bin", {0x34, 0x12});  // one token, shorter than a magic
  EXPECT_EQ(TokenFile(dir / "two.bin").layout(), TokenFileLayout::nanogpt);
  EXPECT_EQ(TokenFile(dir / "two.bin").tokens()[0], 0x1234);
  // The magic's two halves as tokens: 55432 is past the GPT-2 vocabulary, so it cannot be data.
  const std::string message = io_error_of([&] {
    write_raw(dir / "half.bin", {0x88, 0xD8, 0x34, 0x01, 0x00});  // the magic, then one byte
    TokenFile file(dir / "half.bin");
  });
  expect_mentions(message, {"half.bin", "truncated", "1024-byte header"});
}

TEST(TokenFile, EmptyFile) {
  ScratchDir dir;
  write_raw(dir / "val.bin", {});
  expect_mentions(io_error_of([&] { TokenFile file(dir / "val.bin"); }),
                  {"val.bin", "empty file", "magic 20240520"});
}

TEST(TokenFile, LlmcHeaderClaimsMoreTokensThanTheFileHolds) {
  ScratchDir dir;
  write_raw(dir / "a.bin", llmc_bytes(kLlmcTokenMagic, 1, 10, {1, 2, 3}));
  expect_mentions(io_error_of([&] { TokenFile file(dir / "a.bin"); }),
                  {"a.bin", "truncated", "claims 10 tokens", "20 bytes", "holds 6"});
  // One token short, and one byte short, are as truncated as half the file.
  write_raw(dir / "b.bin", llmc_bytes(kLlmcTokenMagic, 1, 4, {1, 2, 3}));
  expect_mentions(io_error_of([&] { TokenFile file(dir / "b.bin"); }), {"b.bin", "truncated", "holds 6"});
  std::vector<std::uint8_t> odd = llmc_bytes(kLlmcTokenMagic, 1, 3, {1, 2, 3});
  odd.pop_back();
  write_raw(dir / "c.bin", odd);
  expect_mentions(io_error_of([&] { TokenFile file(dir / "c.bin"); }), {"c.bin", "truncated", "holds 5"});
}

TEST(TokenFile, LlmcTrailingData) {
  ScratchDir dir;
  write_raw(dir / "a.bin", llmc_bytes(kLlmcTokenMagic, 1, 2, {1, 2, 3}));
  expect_mentions(io_error_of([&] { TokenFile file(dir / "a.bin"); }),
                  {"a.bin", "claims 2 tokens", "holds 6", "trailing data"});
}

TEST(TokenFile, LlmcHeaderCutShort) {
  ScratchDir dir;
  std::vector<std::uint8_t> bytes = llmc_bytes(kLlmcTokenMagic, 1, 1, {7});
  bytes.resize(600);
  write_raw(dir / "cut.bin", bytes);
  expect_mentions(io_error_of([&] { TokenFile file(dir / "cut.bin"); }),
                  {"cut.bin", "600 bytes", "1024-byte header"});
}

TEST(TokenFile, LlmcVersionTwoIsRefusedByName) {
  ScratchDir dir;
  write_raw(dir / "llama.bin", llmc_bytes(kLlmcTokenMagic, 2, 1, {7, 0}));
  expect_mentions(io_error_of([&] { TokenFile file(dir / "llama.bin"); }),
                  {"llama.bin", "version 1", "found version 2", "uint32"});
}

TEST(TokenFile, LlmcNonPositiveCount) {
  ScratchDir dir;
  write_raw(dir / "zero.bin", llmc_bytes(kLlmcTokenMagic, 1, 0, {}));
  expect_mentions(io_error_of([&] { TokenFile file(dir / "zero.bin"); }), {"zero.bin", "claims 0 tokens"});
  write_raw(dir / "neg.bin", llmc_bytes(kLlmcTokenMagic, 1, -5, {}));
  expect_mentions(io_error_of([&] { TokenFile file(dir / "neg.bin"); }), {"neg.bin", "claims -5 tokens"});
}

TEST(TokenFile, NanoGptOddByteCount) {
  ScratchDir dir;
  write_raw(dir / "train.bin", {1, 0, 2, 0, 3});
  expect_mentions(io_error_of([&] { TokenFile file(dir / "train.bin"); }),
                  {"train.bin", "5 bytes", "whole number of uint16 tokens"});
}

TEST(TokenFile, TokenPastTheVocabularyIsNamedWithItsIndex) {
  ScratchDir dir;
  auto tokens = random_tokens(100, 3);
  tokens[57] = 50304;
  write_nanogpt_token_file(dir / "train.bin", tokens);
  expect_mentions(io_error_of([&] { TokenFile file(dir / "train.bin"); }),
                  {"train.bin", "token id 50304", "index 57", "vocabulary of 50304"});
  tokens[57] = 50303;  // the last id of the padded vocabulary is fine
  write_llmc_token_file(dir / "x_val.bin", tokens);
  EXPECT_EQ(TokenFile(dir / "x_val.bin").tokens()[57], 50303);
  // A smaller vocabulary is checked as given.
  expect_mentions(io_error_of([&] { TokenFile file(dir / "x_val.bin", 50257); }),
                  {"x_val.bin", "token id 50303", "index 57", "vocabulary of 50257", "llm.c"});
}

TEST(TokenFile, MissingFileAndFolder) {
  ScratchDir dir;
  expect_mentions(io_error_of([&] { TokenFile file(dir / "nope.bin"); }), {"nope.bin", "not found"});
  expect_mentions(io_error_of([&] { TokenFile file(dir.path()); }), {"expected a regular file", "directory"});
}

TEST(TokenFile, FifoIsRefusedWithoutBlocking) {
  ScratchDir dir;
  ASSERT_EQ(::mkfifo((dir / "pipe.bin").c_str(), 0600), 0);
  expect_mentions(io_error_of([&] { TokenFile file(dir / "pipe.bin"); }),
                  {"pipe.bin", "expected a regular file", "FIFO"});
}

TEST(TokenFile, WritersRefuseIdsThatDoNotFitUint16) {
  ScratchDir dir;
  const std::vector<std::int64_t> tokens = {1, 65536};
  const std::string message = sublet::testing::message_of<ValueError>(
      [&] { write_nanogpt_token_file(dir / "train.bin", tokens); });
  expect_mentions(message, {"train.bin", "65536", "index 1"});
  EXPECT_FALSE(std::filesystem::exists(dir / "train.bin"));
}

}  // namespace
}  // namespace sublet::data
