#include "runtime/data/token_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "core/errors.h"
#include "core/random.h"
#include "runtime/data/text_corpus.h"
#include "runtime/data/token_file.h"

namespace sublet::data {
namespace {

// The stream of the training windows: stream_key(seed, kTokenWindowStream, step).
constexpr std::uint64_t kTokenWindowStream = 0x544f4b454e000001ULL;

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g%%", fraction * 100.0);
  return text;
}

void check_fraction(double fraction) {
  if (!(fraction > 0.0 && fraction < 1.0)) {
    throw ValueError("validation fraction must be in (0, 1), got " + std::to_string(fraction));
  }
}

// The first (1 - fraction) of `whole` for training and the rest for validation.
std::pair<TokenSegment, TokenSegment> split_tail(const TokenSegment& whole, double fraction,
                                                 const std::string& source) {
  const std::int64_t validation = static_cast<std::int64_t>(
      std::floor(static_cast<double>(whole.size()) * fraction));
  const std::int64_t train = whole.size() - validation;
  if (validation < 1 || train < 1) {
    throw IoError(source + ": " + std::to_string(whole.size()) +
                  " tokens are too few to keep the last " + percent(fraction) +
                  " for validation; expected a longer text");
  }
  return {whole.slice(0, train, source + " (training part: first " + percent(1 - fraction) + ")"),
          whole.slice(train, validation, source + " (validation part: last " + percent(fraction) + ")")};
}

std::vector<std::int64_t> prefix_sums(const TokenSplit& split, std::int64_t per_segment_less,
                                      std::int64_t divide_by) {
  std::vector<std::int64_t> sums{0};
  for (const TokenSegment& segment : split.segments) {
    sums.push_back(sums.back() + (segment.size() - per_segment_less) / divide_by);
  }
  return sums;
}

// Validates the options and that every segment holds at least one window.
void check_windows(const TokenSplit& split, const TokenBatchOptions& options, const char* who) {
  if (options.batch_size() < 1 || options.block_size() < 1) {
    throw ValueError(std::string(who) + ": batch_size and block_size must be >= 1, got " +
                     std::to_string(options.batch_size()) + " and " +
                     std::to_string(options.block_size()));
  }
  if (split.segments.empty()) throw ValueError(std::string(who) + ": the split has no tokens");
  for (const TokenSegment& segment : split.segments) {
    if (segment.size() < options.block_size() + 1) {
      throw IoError(segment.name() + ": " + std::to_string(segment.size()) +
                    " tokens, fewer than one window of block_size + 1 = " +
                    std::to_string(options.block_size() + 1) + " tokens");
    }
  }
}

// The segment holding flat index `index` of `offsets` (prefix sums starting at 0).
std::size_t segment_of(const std::vector<std::int64_t>& offsets, std::int64_t index) {
  const auto it = std::upper_bound(offsets.begin(), offsets.end(), index);
  return static_cast<std::size_t>(it - offsets.begin()) - 1;
}

TokenBatch make_batch(const TokenSplit& split, const std::vector<std::pair<std::size_t, std::int64_t>>& windows,
                      const TokenBatchOptions& options) {
  const std::int64_t rows = static_cast<std::int64_t>(windows.size());
  const std::int64_t block = options.block_size();
  std::vector<std::int64_t> inputs(static_cast<std::size_t>(rows * block));
  std::vector<std::int64_t> targets(inputs.size());
  std::vector<std::int64_t> window(static_cast<std::size_t>(block + 1));
  for (std::int64_t row = 0; row < rows; ++row) {
    const auto& [segment, start] = windows[static_cast<std::size_t>(row)];
    split.segments[segment].copy_to(start, block + 1, window.data());
    std::copy(window.begin(), window.end() - 1, inputs.begin() + row * block);
    std::copy(window.begin() + 1, window.end(), targets.begin() + row * block);
  }
  const TensorOptions tensor_options = TensorOptions(DType::Int64).device(options.device());
  return {Tensor::from_vector(inputs, {rows, block}, tensor_options),
          Tensor::from_vector(targets, {rows, block}, tensor_options)};
}

std::string count_text(std::int64_t count, const char* unit) {
  return std::to_string(count) + " " + unit;
}

}  // namespace

TokenSegment::TokenSegment(std::string name, std::shared_ptr<const void> owner,
                           std::span<const std::uint8_t> tokens)
    : name_(std::move(name)), owner_(std::move(owner)), data_(tokens.data()),
      size_(static_cast<std::int64_t>(tokens.size())), token_bytes_(1) {}

TokenSegment::TokenSegment(std::string name, std::shared_ptr<const void> owner,
                           std::span<const std::uint16_t> tokens)
    : name_(std::move(name)), owner_(std::move(owner)), data_(tokens.data()),
      size_(static_cast<std::int64_t>(tokens.size())), token_bytes_(2) {}

std::int64_t TokenSegment::operator[](std::int64_t index) const {
  if (token_bytes_ == 1) return static_cast<const std::uint8_t*>(data_)[index];
  return static_cast<const std::uint16_t*>(data_)[index];
}

void TokenSegment::copy_to(std::int64_t start, std::int64_t count, std::int64_t* out) const {
  if (token_bytes_ == 1) {
    const auto* tokens = static_cast<const std::uint8_t*>(data_) + start;
    std::copy(tokens, tokens + count, out);
  } else {
    const auto* tokens = static_cast<const std::uint16_t*>(data_) + start;
    std::copy(tokens, tokens + count, out);
  }
}

TokenSegment TokenSegment::slice(std::int64_t start, std::int64_t count, std::string name) const {
  if (start < 0 || count < 0 || start + count > size_) {
    throw ValueError(name_ + ": slice [" + std::to_string(start) + ", " +
                     std::to_string(start + count) + ") is outside its " + std::to_string(size_) +
                     " tokens");
  }
  TokenSegment part = *this;
  part.name_ = std::move(name);
  part.data_ = static_cast<const std::uint8_t*>(data_) + start * token_bytes_;
  part.size_ = count;
  return part;
}

std::int64_t TokenSplit::size() const {
  std::int64_t total = 0;
  for (const TokenSegment& segment : segments) total += segment.size();
  return total;
}

TokenDataset load_text_dataset(const std::filesystem::path& file_or_folder,
                               const TokenDataOptions& options) {
  check_fraction(options.validation_fraction());
  auto corpus = std::make_shared<TextCorpus>(read_text_corpus(file_or_folder));
  const std::string source = file_or_folder.string();
  const TokenSegment whole(source, corpus, std::span<const std::uint8_t>(corpus->bytes));
  auto [train, validation] = split_tail(whole, options.validation_fraction(), source);
  TokenDataset dataset;
  dataset.name = "text:" + source;
  dataset.vocab_size = 256;
  dataset.description =
      source + ": " + count_text(static_cast<std::int64_t>(corpus->files.size()), "file(s)") + ", " +
      count_text(whole.size(), "bytes") + "; byte tokens (vocabulary 256); training " +
      count_text(train.size(), "bytes") + ", validation the last " +
      percent(options.validation_fraction()) + " (" + count_text(validation.size(), "bytes") + ")";
  dataset.train.segments.push_back(std::move(train));
  dataset.validation.segments.push_back(std::move(validation));
  return dataset;
}

TokenDataset load_token_file_dataset(const std::filesystem::path& file_or_folder,
                                     const TokenDataOptions& options) {
  namespace fs = std::filesystem;
  const std::string source = file_or_folder.string();
  TokenDataset dataset;
  dataset.name = "tokens:" + source;
  dataset.vocab_size = options.vocab_size();
  std::error_code error;
  const fs::file_status status = fs::status(file_or_folder, error);
  if (!fs::exists(status)) throw IoError(source + ": file or folder not found");
  const auto open = [&](const fs::path& path) {
    auto file = std::make_shared<TokenFile>(path, options.vocab_size());
    return TokenSegment(path.string(), file, file->tokens());
  };
  if (!fs::is_directory(status)) {
    check_fraction(options.validation_fraction());
    auto file = std::make_shared<TokenFile>(file_or_folder, options.vocab_size());
    const TokenSegment whole(source, file, file->tokens());
    auto [train, validation] = split_tail(whole, options.validation_fraction(), source);
    dataset.description = source + ": " + to_string(file->layout()) + " token file, " +
                          count_text(file->size(), "tokens") + "; validation the last " +
                          percent(options.validation_fraction());
    dataset.train.segments.push_back(std::move(train));
    dataset.validation.segments.push_back(std::move(validation));
    return dataset;
  }
  std::vector<fs::path> train_files, validation_files;
  if (fs::exists(file_or_folder / "train.bin", error) && fs::exists(file_or_folder / "val.bin", error)) {
    train_files = {file_or_folder / "train.bin"};
    validation_files = {file_or_folder / "val.bin"};
  } else {
    for (fs::directory_iterator it(file_or_folder, error), end; !error && it != end; it.increment(error)) {
      const std::string name = it->path().filename().string();
      if (name.size() < 4 || name.compare(name.size() - 4, 4, ".bin") != 0) continue;
      if (name.find("_train") != std::string::npos) train_files.push_back(it->path());
      else if (name.find("_val") != std::string::npos) validation_files.push_back(it->path());
    }
    if (error) throw IoError(source + ": cannot list the folder (" + error.message() + ")");
    std::sort(train_files.begin(), train_files.end());
    std::sort(validation_files.begin(), validation_files.end());
  }
  if (train_files.empty() || validation_files.empty()) {
    throw IoError(source + ": expected nanoGPT's train.bin and val.bin, or llm.c's *_train*.bin "
                  "and *_val*.bin, found " + count_text(static_cast<std::int64_t>(train_files.size()),
                  "training") + " and " +
                  count_text(static_cast<std::int64_t>(validation_files.size()), "validation file(s)"));
  }
  for (const fs::path& path : train_files) dataset.train.segments.push_back(open(path));
  for (const fs::path& path : validation_files) dataset.validation.segments.push_back(open(path));
  dataset.description = source + ": " + count_text(static_cast<std::int64_t>(train_files.size()),
                        "training file(s)") + " (" + count_text(dataset.train.size(), "tokens") +
                        "), " + count_text(static_cast<std::int64_t>(validation_files.size()),
                        "validation file(s)") + " (" + count_text(dataset.validation.size(), "tokens") +
                        "); vocabulary " + std::to_string(options.vocab_size());
  return dataset;
}

TokenDataset load_gpt_dataset(std::string_view kind, const std::filesystem::path& path,
                              const TokenDataOptions& options) {
  if (kind == "text") {
    if (!path.empty()) return load_text_dataset(path, options);
    const std::filesystem::path corpus = default_text_corpus_dir();
    std::error_code error;
    if (!std::filesystem::is_directory(corpus, error)) {
      throw IoError(corpus.string() + ": the default text corpus (Python 3.11's documentation "
                    "sources) is not installed; run scripts/setup.sh (it installs Debian's "
                    "python3.11-doc) or pass --data-dir with a text file or folder");
    }
    return load_text_dataset(corpus, options);
  }
  if (kind == "tokens") {
    if (path.empty()) {
      throw ValueError("--data tokens needs --data-dir: a folder of token files (nanoGPT's "
                       "train.bin/val.bin or llm.c's *_train*.bin/*_val*.bin) or one .bin file");
    }
    return load_token_file_dataset(path, options);
  }
  throw ValueError("GPT data: expected kind text or tokens, got '" + std::string(kind) + "'");
}

RandomWindowSampler::RandomWindowSampler(TokenSplit split, TokenBatchOptions options)
    : split_(std::move(split)), options_(options) {
  check_windows(split_, options_, "RandomWindowSampler");
  window_offsets_ = prefix_sums(split_, options_.block_size(), 1);
  token_offsets_ = prefix_sums(split_, 0, 1);
}

std::vector<std::int64_t> RandomWindowSampler::window_starts(std::int64_t step) const {
  Random random(stream_key(options_.seed(), kTokenWindowStream, static_cast<std::uint64_t>(step)));
  std::vector<std::int64_t> starts;
  starts.reserve(static_cast<std::size_t>(options_.batch_size()));
  for (std::int64_t row = 0; row < options_.batch_size(); ++row) {
    const auto window = static_cast<std::int64_t>(random.below(static_cast<std::uint64_t>(window_count())));
    const std::size_t segment = segment_of(window_offsets_, window);
    starts.push_back(token_offsets_[segment] + window - window_offsets_[segment]);
  }
  return starts;
}

TokenBatch RandomWindowSampler::batch(std::int64_t step) const {
  std::vector<std::pair<std::size_t, std::int64_t>> windows;
  for (const std::int64_t start : window_starts(step)) {
    const std::size_t segment = segment_of(token_offsets_, start);
    windows.emplace_back(segment, start - token_offsets_[segment]);
  }
  return make_batch(split_, windows, options_);
}

ValidationBatches::ValidationBatches(TokenSplit split, TokenBatchOptions options,
                                     std::int64_t max_batches)
    : split_(std::move(split)), options_(options), max_batches_(max_batches) {
  check_windows(split_, options_, "ValidationBatches");
  if (max_batches < 0) {
    throw ValueError("ValidationBatches: max_batches must be >= 0 (0: all), got " +
                     std::to_string(max_batches));
  }
  // Starts 0, T, 2T, ... while start + T + 1 <= size: (size - 1) / T windows.
  window_offsets_ = prefix_sums(split_, 1, options_.block_size());
}

std::int64_t ValidationBatches::num_batches() const {
  const std::int64_t all = (window_count() + options_.batch_size() - 1) / options_.batch_size();
  return max_batches_ > 0 ? std::min(all, max_batches_) : all;
}

std::optional<TokenBatch> ValidationBatches::next() {
  const std::int64_t limit =
      std::min(window_count(), num_batches() * options_.batch_size());
  if (next_window_ >= limit) return std::nullopt;
  const std::int64_t rows = std::min(options_.batch_size(), limit - next_window_);
  std::vector<std::pair<std::size_t, std::int64_t>> windows;
  for (std::int64_t w = next_window_; w < next_window_ + rows; ++w) {
    const std::size_t segment = segment_of(window_offsets_, w);
    windows.emplace_back(segment, (w - window_offsets_[segment]) * options_.block_size());
  }
  next_window_ += rows;
  return make_batch(split_, windows, options_);
}

}  // namespace sublet::data
