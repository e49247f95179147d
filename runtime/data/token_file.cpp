#include "runtime/data/token_file.h"

#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "core/errors.h"
#include "runtime/io/file_bytes.h"

namespace sublet::data {
namespace {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian and are mapped as they are");

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& problem) {
  throw IoError(path.string() + ": " + problem);
}

std::int32_t read_le_i32(const std::uint8_t* bytes) {
  std::int32_t value;
  std::memcpy(&value, bytes, sizeof(value));
  return value;
}

std::span<const std::uint16_t> as_tokens(std::span<const std::uint8_t> bytes) {
  // The mapping is page-aligned and the llm.c header is 1024 bytes: the tokens are aligned.
  return {reinterpret_cast<const std::uint16_t*>(bytes.data()), bytes.size() / 2};
}

std::vector<std::uint8_t> token_bytes(const std::filesystem::path& path,
                                      std::span<const std::int64_t> tokens) {
  std::vector<std::uint8_t> bytes;
  bytes.reserve(tokens.size() * 2);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > 0xFFFF) {
      throw ValueError(path.string() + ": token " + std::to_string(tokens[i]) + " at index " +
                       std::to_string(i) + " does not fit a uint16 token file");
    }
    bytes.push_back(static_cast<std::uint8_t>(tokens[i] & 0xFF));
    bytes.push_back(static_cast<std::uint8_t>(tokens[i] >> 8));
  }
  return bytes;
}

}  // namespace

const char* to_string(TokenFileLayout layout) {
  return layout == TokenFileLayout::llmc ? "llm.c" : "nanoGPT";
}

TokenFile::TokenFile(const std::filesystem::path& path, std::int64_t vocab_size) : file_(path) {
  if (vocab_size <= 0 || vocab_size > 65536) {
    throw ValueError(path.string() + ": vocabulary size must be in [1, 65536] for uint16 tokens, got " +
                     std::to_string(vocab_size));
  }
  const std::span<const std::uint8_t> bytes = file_.bytes();
  if (bytes.empty()) {
    fail(path, "empty file; expected uint16 GPT-2 token ids (nanoGPT's train.bin/val.bin) or an "
               "llm.c token file (1024-byte header, magic 20240520)");
  }
  if (bytes.size() >= 4 && read_le_i32(bytes.data()) == kLlmcTokenMagic) {
    layout_ = TokenFileLayout::llmc;
    if (bytes.size() < kLlmcHeaderBytes) {
      fail(path, "truncated llm.c token file: " + std::to_string(bytes.size()) +
                     " bytes, shorter than the 1024-byte header");
    }
    const std::int32_t version = read_le_i32(bytes.data() + 4);
    if (version != kLlmcTokenVersion) {
      fail(path, "expected llm.c token file version 1 (uint16 tokens), found version " +
                     std::to_string(version) +
                     (version == 2 ? " (uint32 tokens, llm.c's Llama 3 files: not supported)" : ""));
    }
    const std::int32_t count = read_le_i32(bytes.data() + 8);
    const std::uint64_t payload = bytes.size() - kLlmcHeaderBytes;
    if (count <= 0) {
      fail(path, "llm.c header claims " + std::to_string(count) + " tokens; expected at least 1");
    }
    const std::uint64_t expected = static_cast<std::uint64_t>(count) * 2;
    if (payload < expected) {
      fail(path, "truncated: the llm.c header claims " + std::to_string(count) + " tokens (" +
                     std::to_string(expected) + " bytes after the header), the file holds " +
                     std::to_string(payload));
    }
    if (payload > expected) {
      fail(path, "the llm.c header claims " + std::to_string(count) + " tokens (" +
                     std::to_string(expected) + " bytes after the header), the file holds " +
                     std::to_string(payload) + " (trailing data)");
    }
    tokens_ = as_tokens(bytes.subspan(kLlmcHeaderBytes));
  } else {
    if (bytes.size() % 2 != 0) {
      fail(path, std::to_string(bytes.size()) +
                     " bytes is not a whole number of uint16 tokens (nanoGPT layout; truncated?)");
    }
    tokens_ = as_tokens(bytes);
  }
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i] >= vocab_size) {
      fail(path, "token id " + std::to_string(tokens_[i]) + " at token index " + std::to_string(i) +
                     " is past the vocabulary of " + std::to_string(vocab_size) + " tokens (" +
                     to_string(layout_) + " layout)");
    }
  }
}

void write_llmc_token_file(const std::filesystem::path& path, std::span<const std::int64_t> tokens) {
  if (tokens.size() > static_cast<std::size_t>(INT32_MAX)) {
    throw ValueError(path.string() + ": " + std::to_string(tokens.size()) +
                     " tokens do not fit llm.c's int32 count");
  }
  std::vector<std::uint8_t> bytes(kLlmcHeaderBytes, 0);
  const std::int32_t header[3] = {kLlmcTokenMagic, kLlmcTokenVersion,
                                  static_cast<std::int32_t>(tokens.size())};
  std::memcpy(bytes.data(), header, sizeof(header));
  const std::vector<std::uint8_t> payload = token_bytes(path, tokens);
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  io::write_file_bytes(path, bytes);
}

void write_nanogpt_token_file(const std::filesystem::path& path,
                              std::span<const std::int64_t> tokens) {
  io::write_file_bytes(path, token_bytes(path, tokens));
}

}  // namespace sublet::data
