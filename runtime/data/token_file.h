#pragma once
// Files of GPT-2 token ids, as the two common training codebases write them:
//  - llm.c: a header of 256 little-endian int32 (header[0] = 20240520, the magic; header[1] = 1,
//    the version with uint16 tokens; header[2] = the token count), then the tokens as uint16;
//  - nanoGPT (data/*/prepare.py): the tokens as uint16 and nothing else (train.bin, val.bin).
// A file is told apart by its first four bytes: llm.c's magic read as two uint16 tokens would be
// 55432 and 308, and 55432 is past GPT-2's vocabulary, so no valid nanoGPT file starts that way.
// Token files are mapped, not read: the operating system pages in the windows a run uses.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>

#include "runtime/data/regular_file.h"

namespace sublet::data {

inline constexpr std::int32_t kLlmcTokenMagic = 20240520;
inline constexpr std::int32_t kLlmcTokenVersion = 1;
inline constexpr std::size_t kLlmcHeaderInts = 256;
inline constexpr std::size_t kLlmcHeaderBytes = kLlmcHeaderInts * 4;
// GPT-2's 50,257 tokens padded to a multiple of 128, as nanoGPT and llm.c train with.
inline constexpr std::int64_t kGpt2PaddedVocabSize = 50304;

enum class TokenFileLayout { llmc, nanogpt };
const char* to_string(TokenFileLayout layout);

class TokenFile {
 public:
  // Maps `path` and checks it whole. Throws IoError naming the file and what was expected for an
  // empty file, an llm.c header that is cut short, of another magic or version, or that claims
  // more (or fewer) tokens than follow it, an odd number of bytes in a nanoGPT file, and any
  // token id >= vocab_size (with its index).
  TokenFile(const std::filesystem::path& path, std::int64_t vocab_size = kGpt2PaddedVocabSize);

  TokenFileLayout layout() const { return layout_; }
  std::span<const std::uint16_t> tokens() const { return tokens_; }
  std::int64_t size() const { return static_cast<std::int64_t>(tokens_.size()); }
  const std::filesystem::path& path() const { return file_.path(); }

 private:
  MappedFile file_;
  TokenFileLayout layout_ = TokenFileLayout::nanogpt;
  std::span<const std::uint16_t> tokens_;
};

// Writers (atomic). Throw ValueError for a token id outside [0, 65535] or, for llm.c, more tokens
// than an int32 count holds.
void write_llmc_token_file(const std::filesystem::path& path, std::span<const std::int64_t> tokens);
void write_nanogpt_token_file(const std::filesystem::path& path,
                              std::span<const std::int64_t> tokens);

}  // namespace sublet::data
