#include "runtime/data/text_corpus.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <system_error>

#include "core/errors.h"
#include "runtime/data/regular_file.h"

namespace sublet::data {
namespace {

bool hidden(const std::filesystem::path& name) {
  const std::string text = name.filename().string();
  return !text.empty() && text.front() == '.';
}

}  // namespace

std::vector<std::filesystem::path> list_text_files(const std::filesystem::path& folder) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  std::error_code error;
  fs::recursive_directory_iterator it(folder, error);
  if (error) throw IoError(folder.string() + ": cannot list the folder (" + error.message() + ")");
  for (const fs::recursive_directory_iterator end; it != end; it.increment(error)) {
    if (error) break;
    const fs::path& path = it->path();
    if (hidden(path)) {
      if (it->is_directory(error)) it.disable_recursion_pending();
      continue;
    }
    const fs::file_status link_status = it->symlink_status(error);
    const fs::file_status status = it->status(error);
    if (fs::is_directory(status)) {
      // A link to a folder is not followed: it could lead back up and read the corpus twice.
      if (fs::is_symlink(link_status)) {
        throw IoError(path.string() + ": a link to a folder inside a text corpus folder; expected "
                      "regular files and folders (links to folders are not followed)");
      }
      continue;
    }
    if (!fs::is_regular_file(status)) {
      throw IoError(path.string() + ": expected a regular file in the text corpus folder, found " +
                    (fs::exists(status) ? "a FIFO, socket or device" : "a broken link"));
    }
    files.push_back(path);
  }
  if (error) throw IoError(folder.string() + ": cannot list the folder (" + error.message() + ")");
  std::sort(files.begin(), files.end(), [&](const fs::path& a, const fs::path& b) {
    return a.lexically_relative(folder).generic_string() < b.lexically_relative(folder).generic_string();
  });
  return files;
}

TextCorpus read_text_corpus(const std::filesystem::path& file_or_folder) {
  namespace fs = std::filesystem;
  TextCorpus corpus;
  corpus.source = file_or_folder;
  std::error_code error;
  const fs::file_status status = fs::status(file_or_folder, error);
  if (!fs::exists(status)) throw IoError(file_or_folder.string() + ": file or folder not found");
  if (!fs::is_directory(status)) {
    corpus.files = {file_or_folder};
    corpus.bytes = read_regular_file(file_or_folder);
    if (corpus.bytes.empty()) {
      throw IoError(file_or_folder.string() + ": empty file; expected text (bytes are the tokens)");
    }
    return corpus;
  }
  corpus.files = list_text_files(file_or_folder);
  if (corpus.files.empty()) {
    throw IoError(file_or_folder.string() + ": expected text files in the folder, found none "
                  "(names starting with '.' are skipped)");
  }
  for (const fs::path& file : corpus.files) {
    const std::vector<std::uint8_t> bytes = read_regular_file(file);
    corpus.bytes.insert(corpus.bytes.end(), bytes.begin(), bytes.end());
  }
  if (corpus.bytes.empty()) {
    throw IoError(file_or_folder.string() + ": the folder holds " +
                  std::to_string(corpus.files.size()) + " file(s), all empty; expected text");
  }
  return corpus;
}

std::filesystem::path default_text_corpus_dir() {
  return "/usr/share/doc/python3.11/html/_sources";
}

double byte_unigram_entropy(std::span<const std::uint8_t> bytes) {
  std::array<std::uint64_t, 256> counts{};
  for (const std::uint8_t b : bytes) ++counts[b];
  const auto total = static_cast<double>(bytes.size());
  double entropy = 0.0;
  for (const std::uint64_t count : counts) {
    if (count == 0) continue;
    const double p = static_cast<double>(count) / total;
    entropy -= p * std::log(p);
  }
  return entropy;
}

}  // namespace sublet::data
