#pragma once
// Plain text as byte-level tokens (vocabulary 256): one file, or every file of a folder.
// A folder is read recursively; files and folders whose names start with '.' are left out (a
// checkout's .git, editor files), and the files are concatenated in the byte-wise order of their
// paths relative to the folder, so the same folder gives the same bytes on every machine.
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace sublet::data {

struct TextCorpus {
  std::filesystem::path source;             // the file or folder read
  std::vector<std::filesystem::path> files;  // in reading order
  std::vector<std::uint8_t> bytes;           // all files, concatenated
};

// Throws IoError naming the path: a missing path, a file that is empty (or a folder whose files
// hold no bytes at all), an entry that is not a regular file or folder (a FIFO, a socket, a
// link to a folder), a file that cannot be read.
TextCorpus read_text_corpus(const std::filesystem::path& file_or_folder);

// The files read_text_corpus reads from `folder`, in its order.
std::vector<std::filesystem::path> list_text_files(const std::filesystem::path& folder);

// The default corpus: the reStructuredText sources of Python 3.11's documentation as Debian's
// python3.11-doc package installs them (scripts/setup.sh installs it).
std::filesystem::path default_text_corpus_dir();

// The entropy, in nats, of the bytes' unigram distribution: -sum p(b) log p(b). A model that
// predicts each byte from its frequency alone reaches this loss. 0 for no bytes.
double byte_unigram_entropy(std::span<const std::uint8_t> bytes);

}  // namespace sublet::data
