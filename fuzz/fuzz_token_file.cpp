// Arbitrary bytes as a token file (llm.c's header layout or nanoGPT's headerless one): a read
// whose tokens are all inside the vocabulary and that batches into windows of exactly those
// tokens, or an IoError — never a crash, a hang or an out-of-range id.
#include <cstdint>
#include <cstdlib>

#include "fuzz/fuzz_input_file.h"
#include "core/errors.h"
#include "runtime/data/token_dataset.h"
#include "runtime/data/token_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sublet::data;
  static const auto path = sublet::fuzz::scratch_file("-tokens.bin");
  sublet::fuzz::write_input(path, data, size);
  // A small vocabulary makes out-of-range ids common, so the check is exercised.
  const std::int64_t vocab = 1 + (size > 0 ? data[0] : 0) * 257;
  try {
    const TokenFile file(path, vocab);
    const std::size_t header = file.layout() == TokenFileLayout::llmc ? kLlmcHeaderBytes : 0;
    if (header + 2 * static_cast<std::size_t>(file.size()) != size) std::abort();
    for (const std::uint16_t token : file.tokens()) {
      if (token >= vocab) std::abort();
    }
    const TokenDataset dataset = load_token_file_dataset(path, TokenDataOptions().vocab_size(vocab));
    const RandomWindowSampler sampler(dataset.train, TokenBatchOptions(3, 1));
    const std::vector<std::int64_t> starts = sampler.window_starts(0);
    const std::vector<std::int64_t> inputs = sampler.batch(0).inputs.to_vector<std::int64_t>();
    for (std::size_t row = 0; row < starts.size(); ++row) {
      if (inputs[row] != file.tokens()[static_cast<std::size_t>(starts[row])]) std::abort();
    }
  } catch (const sublet::IoError&) {
  }
  return 0;
}
