// Arbitrary bytes as a folder of text files: the input is cut into up to four files (some in a
// subfolder, one hidden) named by its first byte. The corpus must be the visible files' bytes in
// path order, and its training and validation windows must hold exactly those bytes; or the read
// fails with an IoError (e.g. all files empty).
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz/fuzz_input_file.h"
#include "core/errors.h"
#include "runtime/data/text_corpus.h"
#include "runtime/data/token_dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  using namespace sublet::data;
  static const fs::path folder = sublet::fuzz::scratch_file("-text");
  fs::remove_all(folder);
  fs::create_directories(folder / "sub");
  // Names in the order the reader must list them (byte-wise); ".hidden" must be skipped.
  static const char* const kNames[] = {"a.txt", "sub/b.txt", "sub/c", ".hidden"};
  const std::size_t layout = size > 0 ? data[0] : 0;
  const std::size_t files = 1 + layout % 4;
  std::vector<std::uint8_t> expected;
  const std::uint8_t* rest = data + (size > 0 ? 1 : 0);
  const std::size_t rest_size = size > 0 ? size - 1 : 0;
  for (std::size_t i = 0; i < files; ++i) {
    const std::size_t begin = rest_size * i / files, end = rest_size * (i + 1) / files;
    sublet::fuzz::write_input(folder / kNames[i], rest + begin, end - begin);
    if (kNames[i][0] != '.') expected.insert(expected.end(), rest + begin, rest + end);
  }
  const std::int64_t block = 1 + static_cast<std::int64_t>(layout / 4 % 8);
  try {
    const TextCorpus corpus = read_text_corpus(folder);
    if (corpus.bytes != expected) std::abort();
    const TokenDataset dataset = load_text_dataset(folder);
    const std::int64_t offset = dataset.train.size();
    if (offset + dataset.validation.size() != static_cast<std::int64_t>(expected.size())) std::abort();
    ValidationBatches batches(dataset.validation, TokenBatchOptions(2, block));
    std::int64_t flat = 0;  // position in the concatenated targets of all windows
    while (const auto batch = batches.next()) {
      for (const std::int64_t target : batch->targets.to_vector<std::int64_t>()) {
        const std::int64_t window = flat / block, column = flat % block;
        if (target != expected[static_cast<std::size_t>(offset + window * block + column + 1)]) std::abort();
        ++flat;
      }
    }
    if (flat != batches.window_count() * block) std::abort();
  } catch (const sublet::IoError&) {
    // Only an empty corpus, or a validation part (the last 10%) shorter than one window, may fail.
    const auto validation = static_cast<std::int64_t>(expected.size()) / 10;
    if (!expected.empty() && validation >= block + 1) std::abort();
  }
  return 0;
}
