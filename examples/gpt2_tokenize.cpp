// gpt2_tokenize VOCAB_DIR TEXT OUT_DIR [nanogpt|llmc]: GPT-2 token files from a text file or
// folder (read as `--data text` reads it), for `sublet train --data tokens --data-dir OUT_DIR`.
// VOCAB_DIR holds encoder.json and vocab.bpe (scripts/fetch_gpt2_bpe.sh). The last 10% of the
// text's bytes becomes the validation file, cut at a line start so no word is split; each part
// ends with <|endoftext|>. nanogpt (default) writes train.bin/val.bin, llmc data_train.bin/data_val.bin.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "runtime/data/gpt2_bpe.h"
#include "runtime/data/text_corpus.h"
#include "runtime/data/token_file.h"

int main(int argc, char** argv) {
  using namespace sublet::data;
  const std::string layout = argc == 5 ? argv[4] : "nanogpt";
  if ((argc != 4 && argc != 5) || (layout != "nanogpt" && layout != "llmc")) {
    std::fprintf(stderr, "usage: %s VOCAB_DIR TEXT_FILE_OR_FOLDER OUT_DIR [nanogpt|llmc]\n", argv[0]);
    return 2;
  }
  try {
    const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::from_folder(argv[1]);
    const TextCorpus corpus = read_text_corpus(argv[2]);
    const std::string_view text(reinterpret_cast<const char*>(corpus.bytes.data()), corpus.bytes.size());
    std::size_t cut = text.size() - text.size() / 10;
    const std::size_t line = text.rfind('\n', cut);
    if (line != std::string_view::npos && line > 0) cut = line + 1;
    const std::filesystem::path out = argv[3];
    std::filesystem::create_directories(out);
    const bool llmc = layout == "llmc";
    for (const bool validation : {false, true}) {
      std::vector<std::int64_t> ids =
          tokenizer.encode(validation ? text.substr(cut) : text.substr(0, cut));
      if (tokenizer.eot_id() >= 0) ids.push_back(tokenizer.eot_id());
      const std::filesystem::path file =
          out / (llmc ? (validation ? "data_val.bin" : "data_train.bin") : (validation ? "val.bin" : "train.bin"));
      if (llmc) {
        write_llmc_token_file(file, ids);
      } else {
        write_nanogpt_token_file(file, ids);
      }
      std::printf("%s: %zu tokens\n", file.c_str(), ids.size());
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 1;
  }
  return 0;
}
