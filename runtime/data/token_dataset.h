#pragma once
// Token streams for language-model training: a training and a validation split, each one or more
// contiguous segments of token ids (a text's bytes, a token file, a part of either).
//
//   TokenDataset data = load_gpt_dataset("text", "");  // the default corpus, bytes as tokens
//   RandomWindowSampler train(data.train, TokenBatchOptions(16, 256).seed(7));
//   TokenBatch batch = train.batch(step);  // inputs/targets: Int64 [16, 256]
//   ValidationBatches val(data.validation, TokenBatchOptions(16, 256), /*max_batches=*/20);
//   while (std::optional<TokenBatch> b = val.next()) { ... }
//
// Sources and splits (docs/gpt-data.md):
//  - text: a file or a folder (text_corpus.h) read as bytes, vocabulary 256; the last
//    validation_fraction of the bytes (default 10%) is the validation split;
//  - token files (token_file.h), vocabulary 50,304: a folder holding nanoGPT's train.bin and
//    val.bin, or llm.c's *_train*.bin and *_val*.bin shards (each split read in name order);
//    a single .bin file is split like text.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"
#include "runtime/tensor.h"

namespace sublet::data {

// A contiguous run of token ids, bytes (text) or uint16 (token files), kept alive by `owner`.
class TokenSegment {
 public:
  TokenSegment(std::string name, std::shared_ptr<const void> owner,
               std::span<const std::uint8_t> tokens);
  TokenSegment(std::string name, std::shared_ptr<const void> owner,
               std::span<const std::uint16_t> tokens);

  const std::string& name() const { return name_; }  // the file, and which part of it
  std::int64_t size() const { return size_; }
  std::int64_t operator[](std::int64_t index) const;
  // Writes tokens [start, start + count) as int64 to `out` (unchecked: callers keep in range).
  void copy_to(std::int64_t start, std::int64_t count, std::int64_t* out) const;
  // Tokens [start, start + count) as a segment of its own, named `name`.
  TokenSegment slice(std::int64_t start, std::int64_t count, std::string name) const;

 private:
  std::string name_;
  std::shared_ptr<const void> owner_;
  const void* data_ = nullptr;
  std::int64_t size_ = 0;
  int token_bytes_ = 1;
};

struct TokenSplit {
  std::vector<TokenSegment> segments;
  std::int64_t size() const;  // tokens in all segments
};

struct TokenDataset {
  std::string name;         // "text:PATH" or "tokens:PATH", for logs
  std::string description;  // what was read and how it was split, one line
  std::int64_t vocab_size = 0;
  TokenSplit train;
  TokenSplit validation;
};

class TokenDataOptions {
 public:
  // The part of a single source (a text, a text folder, one .bin file) kept for validation, taken
  // from its end. Folders of train/val token files ignore it.
  TokenDataOptions& validation_fraction(double value) { validation_fraction_ = value; return *this; }
  // Token ids must be below it (token files only; text is always 256).
  TokenDataOptions& vocab_size(std::int64_t value) { vocab_size_ = value; return *this; }

  double validation_fraction() const { return validation_fraction_; }
  std::int64_t vocab_size() const { return vocab_size_; }

 private:
  double validation_fraction_ = 0.1;
  std::int64_t vocab_size_ = 50304;
};

// Throw IoError naming the file and what was expected for bad data (see text_corpus.h and
// token_file.h), ValueError for a validation fraction outside (0, 1).
TokenDataset load_text_dataset(const std::filesystem::path& file_or_folder,
                               const TokenDataOptions& options = {});
TokenDataset load_token_file_dataset(const std::filesystem::path& file_or_folder,
                                     const TokenDataOptions& options = {});
// The CLI's `--data text|tokens --data-dir PATH`: `kind` "text" reads the default corpus
// (default_text_corpus_dir()) when `path` is empty; "tokens" needs a path. ValueError for another
// kind or a missing path; IoError naming the setup step when the default corpus is absent.
TokenDataset load_gpt_dataset(std::string_view kind, const std::filesystem::path& path,
                              const TokenDataOptions& options = {});

class TokenBatchOptions {
 public:
  TokenBatchOptions(std::int64_t batch_size, std::int64_t block_size)
      : batch_size_(batch_size), block_size_(block_size) {}
  TokenBatchOptions& seed(std::uint64_t value) { seed_ = value; return *this; }
  TokenBatchOptions& device(Device value) { device_ = value; return *this; }

  std::int64_t batch_size() const { return batch_size_; }
  std::int64_t block_size() const { return block_size_; }
  std::uint64_t seed() const { return seed_; }
  Device device() const { return device_; }

 private:
  std::int64_t batch_size_;
  std::int64_t block_size_;
  std::uint64_t seed_ = 0;
  Device device_ = Device::cpu();
};

// Windows of block_size + 1 consecutive tokens: inputs are the first block_size, targets the same
// positions shifted by one (the token that follows each input token). Int64, [rows, block_size].
struct TokenBatch {
  Tensor inputs;
  Tensor targets;
};

// Random windows over a split: uniform over every window start of every segment (a window never
// crosses from one segment into the next). Batch `step` depends only on (seed, step), so a
// resumed run sees the same batches as an uninterrupted one.
class RandomWindowSampler {
 public:
  // Throws ValueError for batch_size or block_size < 1, IoError naming a segment shorter than
  // one window (block_size + 1 tokens).
  RandomWindowSampler(TokenSplit split, TokenBatchOptions options);

  TokenBatch batch(std::int64_t step) const;
  // Where batch `step`'s windows start, as offsets into the split's segments laid end to end.
  std::vector<std::int64_t> window_starts(std::int64_t step) const;
  std::int64_t window_count() const { return window_offsets_.back(); }
  const TokenBatchOptions& options() const { return options_; }

 private:
  TokenSplit split_;
  TokenBatchOptions options_;
  std::vector<std::int64_t> window_offsets_;  // prefix sums of each segment's window starts
  std::vector<std::int64_t> token_offsets_;   // prefix sums of segment sizes
};

// The validation split walked in order: windows starting every block_size tokens, so every token
// after a segment's first is predicted once; batch_size windows a batch, the last one shorter.
class ValidationBatches {
 public:
  // max_batches > 0 stops after that many batches (a quick evaluation); 0 walks everything.
  // Throws as RandomWindowSampler does; ValueError for max_batches < 0.
  ValidationBatches(TokenSplit split, TokenBatchOptions options, std::int64_t max_batches = 0);

  std::optional<TokenBatch> next();
  void reset() { next_window_ = 0; }
  std::int64_t num_batches() const;
  std::int64_t window_count() const { return window_offsets_.back(); }

 private:
  TokenSplit split_;
  TokenBatchOptions options_;
  std::int64_t max_batches_;
  std::vector<std::int64_t> window_offsets_;  // prefix sums of each segment's windows
  std::int64_t next_window_ = 0;
};

}  // namespace sublet::data
