// Arbitrary bytes as GPT-2 BPE vocabulary files: the input up to its first NUL byte is
// encoder.json, the rest vocab.bpe. Loading gives a tokenizer or an IoError; a tokenizer must
// round-trip any text exactly (here the input itself), with ids inside its vocabulary.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/errors.h"
#include "runtime/data/gpt2_bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using sublet::data::Gpt2Tokenizer;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t split = input.find('\0');
  const std::string_view encoder = input.substr(0, split);
  const std::string_view merges = split == std::string_view::npos ? std::string_view() : input.substr(split + 1);
  try {
    const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::from_contents(encoder, merges);
    const std::vector<std::int64_t> ids = tokenizer.encode(input);
    for (const std::int64_t id : ids) {
      if (id < 0 || id >= tokenizer.vocab_size()) std::abort();
    }
    if (tokenizer.decode(ids) != input) std::abort();
  } catch (const sublet::IoError&) {
  }
  return 0;
}
