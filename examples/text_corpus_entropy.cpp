// text_corpus_entropy [PATH]: the size and byte-unigram entropy of a text corpus (a file or a
// folder, read as `sublet train --data text` reads it; default: the default corpus), and the
// validation loss a byte-level model must reach to beat it by 1 nat.
#include <cstdio>
#include <exception>

#include "runtime/data/text_corpus.h"

int main(int argc, char** argv) {
  using namespace sublet::data;
  if (argc > 2) {
    std::fprintf(stderr, "usage: %s [TEXT_FILE_OR_FOLDER]\n", argv[0]);
    return 2;
  }
  try {
    const std::filesystem::path path = argc == 2 ? argv[1] : default_text_corpus_dir();
    const TextCorpus corpus = read_text_corpus(path);
    const double entropy = byte_unigram_entropy(corpus.bytes);
    std::printf("%s: %zu files, %zu bytes, byte-unigram entropy %.4f nats (goal: validation loss <= %.4f)\n",
                path.c_str(), corpus.files.size(), corpus.bytes.size(), entropy, entropy - 1.0);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 1;
  }
  return 0;
}
