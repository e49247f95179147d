// Text corpora: one file or a folder read in a fixed order, hidden entries skipped, bad entries
// refused by name; the byte-unigram entropy against hand-computed values; the default corpus's
// size and entropy against what docs/gpt-data.md states (when the corpus is installed).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include "runtime/data/text_corpus.h"
#include "tests/data/test_support.h"

namespace sublet::data {
namespace {

using sublet::testing::expect_mentions;
using sublet::testing::io_error_of;
using sublet::testing::ScratchDir;

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  sublet::testing::write_raw(path, {text.begin(), text.end()});
}

std::string as_string(const std::vector<std::uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

TEST(TextCorpus, SingleFileIsItsBytes) {
  ScratchDir dir;
  write_text(dir / "tiny.txt", "hello\nworld\n\xff\x00");
  const TextCorpus corpus = read_text_corpus(dir / "tiny.txt");
  EXPECT_EQ(as_string(corpus.bytes), std::string("hello\nworld\n\xff", 13));
  ASSERT_EQ(corpus.files.size(), 1u);
}

TEST(TextCorpus, FolderIsReadRecursivelyInPathOrderSkippingHiddenEntries) {
  ScratchDir dir;
  write_text(dir / "b.txt", "B");
  write_text(dir / "a" / "z.txt", "AZ");
  write_text(dir / "a.txt", "A");
  write_text(dir / "C.txt", "C");  // upper case sorts first, byte-wise
  write_text(dir / "a" / "b" / "c.txt", "ABC");
  write_text(dir / ".git" / "objects" / "x", "HIDDEN-DIR");
  write_text(dir / ".hidden.txt", "HIDDEN-FILE");
  write_text(dir / "a" / ".swp", "HIDDEN-NESTED");
  const TextCorpus corpus = read_text_corpus(dir.path());
  // Byte-wise on relative paths: "C.txt" < "a.txt" ('.' < '/') < "a/b/c.txt" < "a/z.txt" < "b.txt".
  EXPECT_EQ(as_string(corpus.bytes), "CAABCAZB");
  ASSERT_EQ(corpus.files.size(), 5u);
  EXPECT_EQ(corpus.files.front().filename(), "C.txt");
  EXPECT_EQ(list_text_files(dir.path()), corpus.files);
}

TEST(TextCorpus, EmptyFileAndEmptyFolder) {
  ScratchDir dir;
  write_text(dir / "empty.txt", "");
  expect_mentions(io_error_of([&] { read_text_corpus(dir / "empty.txt"); }),
                  {"empty.txt", "empty file", "expected text"});
  expect_mentions(io_error_of([&] { read_text_corpus(dir.path()); }),
                  {dir.path().string(), "1 file(s), all empty"});
  std::filesystem::remove(dir / "empty.txt");
  write_text(dir / ".only-hidden", "x");
  expect_mentions(io_error_of([&] { read_text_corpus(dir.path()); }),
                  {dir.path().string(), "found none", "'.'"});
}

TEST(TextCorpus, EmptyFilesAmongOthersAreHarmless) {
  ScratchDir dir;
  write_text(dir / "a.txt", "");
  write_text(dir / "b.txt", "text");
  EXPECT_EQ(as_string(read_text_corpus(dir.path()).bytes), "text");
}

TEST(TextCorpus, MissingPath) {
  ScratchDir dir;
  expect_mentions(io_error_of([&] { read_text_corpus(dir / "nowhere"); }), {"nowhere", "not found"});
}

TEST(TextCorpus, FifoAloneOrInAFolderIsRefusedWithoutBlocking) {
  ScratchDir dir;
  write_text(dir / "a.txt", "text");
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  expect_mentions(io_error_of([&] { read_text_corpus(dir / "pipe"); }),
                  {"pipe", "expected a regular file", "FIFO"});
  expect_mentions(io_error_of([&] { read_text_corpus(dir.path()); }),
                  {"pipe", "expected a regular file"});
}

TEST(TextCorpus, LinksToFilesAreReadLinksToFoldersAndBrokenLinksRefused) {
  ScratchDir dir;
  write_text(dir / "outside" / "real.txt", "REAL");
  write_text(dir / "corpus" / "a.txt", "A");
  std::filesystem::create_symlink(dir / "outside" / "real.txt", dir / "corpus" / "b.txt");
  EXPECT_EQ(as_string(read_text_corpus(dir / "corpus").bytes), "AREAL");
  std::filesystem::create_symlink(dir / "outside", dir / "corpus" / "c");
  expect_mentions(io_error_of([&] { read_text_corpus(dir / "corpus"); }),
                  {"c", "link to a folder", "not followed"});
  std::filesystem::remove(dir / "corpus" / "c");
  std::filesystem::create_symlink(dir / "missing.txt", dir / "corpus" / "d.txt");
  expect_mentions(io_error_of([&] { read_text_corpus(dir / "corpus"); }), {"d.txt", "broken link"});
}

TEST(ByteUnigramEntropy, HandComputedValues) {
  const std::vector<std::uint8_t> aab = {'a', 'a', 'b'};
  const double expected = -(2.0 / 3 * std::log(2.0 / 3) + 1.0 / 3 * std::log(1.0 / 3));
  EXPECT_TRUE(std::abs(byte_unigram_entropy(aab) - expected) <= 1e-12) << byte_unigram_entropy(aab);
  std::vector<std::uint8_t> all(256 * 3);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint8_t>(i);
  EXPECT_TRUE(std::abs(byte_unigram_entropy(all) - std::log(256.0)) <= 1e-12);
  EXPECT_TRUE(byte_unigram_entropy(std::vector<std::uint8_t>(10, 'x')) == 0.0);
  EXPECT_TRUE(byte_unigram_entropy({}) == 0.0);
}

// The figures docs/gpt-data.md gives for the default corpus must be what the installed corpus
// holds: bytes, files and the entropy (to the 4 decimals printed).
TEST(DefaultTextCorpus, MatchesTheDocumentedSizeAndEntropy) {
  const std::filesystem::path corpus_dir = default_text_corpus_dir();
  if (!std::filesystem::is_directory(corpus_dir)) {
    GTEST_SKIP() << corpus_dir << " is not installed (scripts/setup.sh installs python3.11-doc): "
                 << "would check its size and byte-unigram entropy against docs/gpt-data.md";
  }
  const TextCorpus corpus = read_text_corpus(corpus_dir);
  const double entropy = byte_unigram_entropy(corpus.bytes);
  std::cout << "default corpus: " << corpus.files.size() << " files, " << corpus.bytes.size()
            << " bytes, byte-unigram entropy " << entropy << " nats\n";
  std::ifstream doc(std::filesystem::path(SUBLET_SOURCE_DIR) / "docs" / "gpt-data.md");
  ASSERT_TRUE(doc.good()) << "docs/gpt-data.md is missing";
  std::stringstream text;
  text << doc.rdbuf();
  std::smatch match;
  const std::string page = text.str();
  ASSERT_TRUE(std::regex_search(page, match, std::regex(
      R"(<!-- corpus-figures -->\s*(\d+) files, ([\d,]+) bytes, byte-unigram entropy ([\d.]+) nats)")))
      << "docs/gpt-data.md has no line of corpus figures after <!-- corpus-figures -->";
  std::string documented_bytes = match[2].str();
  std::erase(documented_bytes, ',');
  EXPECT_EQ(std::stoul(match[1].str()), corpus.files.size());
  EXPECT_EQ(std::stoull(documented_bytes), corpus.bytes.size());
  EXPECT_TRUE(std::abs(std::stod(match[3].str()) - entropy) <= 5e-5)
      << "documented " << match[3].str() << ", computed " << entropy;
}

}  // namespace
}  // namespace sublet::data
