// GPT-2's byte-level BPE: merge order and round trips on small vocabularies written by the test,
// every kind of bad vocabulary file, and token ids against npm's JavaScript encoder — from a
// checked-in fixture (tests/data/gpt2_bpe/sample_ids.txt, made by encode_with_npm.js) and, when
// node is installed, live on the fixture and a few kilobytes of the default corpus.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "core/random.h"
#include "runtime/data/gpt2_bpe.h"
#include "runtime/data/text_corpus.h"
#include "tests/data/test_support.h"
#include "tests/throw_message.h"

namespace sublet::data {
namespace {

using sublet::testing::expect_mentions;
using sublet::testing::io_error_of;
using sublet::testing::ScratchDir;

const std::filesystem::path kSourceDir = SUBLET_SOURCE_DIR;

// GPT-2's byte -> character table, as its bytes_to_unicode() defines it, as UTF-8.
std::string byte_char(int b) {
  int code = b;
  const auto printable = [](int x) { return (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE; };
  if (!printable(b)) {
    code = 0x100;
    for (int x = 0; x < b; ++x) code += printable(x) ? 0 : 1;
  }
  std::string out;
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
  return out;
}

std::string vocab_text(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) out += byte_char(static_cast<unsigned char>(c));
  return out;
}

// encoder.json with the 256 byte tokens (ids 0..255) and `extra` after them.
std::string encoder_json(const std::vector<std::string>& extra) {
  std::string json = "{";
  for (int b = 0; b < 256; ++b) {
    std::string key = byte_char(b);
    if (key == "\"" || key == "\\") key = "\\" + key;
    json += "\"" + key + "\": " + std::to_string(b) + ", ";
  }
  for (std::size_t i = 0; i < extra.size(); ++i) {
    json += "\"" + vocab_text(extra[i]) + "\": " + std::to_string(256 + i) + ", ";
  }
  json.resize(json.size() - 2);
  return json + "}";
}

std::string merges_file(const std::vector<std::pair<std::string, std::string>>& merges) {
  std::string text = "#version: 0.2\n";
  for (const auto& [a, b] : merges) text += vocab_text(a) + " " + vocab_text(b) + "\n";
  return text;
}

std::vector<std::string> token_texts(const Gpt2Tokenizer& tokenizer, const std::vector<std::int64_t>& ids) {
  std::vector<std::string> out;
  for (const std::int64_t id : ids) out.push_back(tokenizer.token_bytes(id));
  return out;
}

using Texts = std::vector<std::string>;

TEST(Gpt2Bpe, LowestRankMergesFirst) {
  const std::string encoder = encoder_json({"ab", "bc", "abc"});
  const Gpt2Tokenizer bc_first = Gpt2Tokenizer::from_contents(encoder, merges_file({{"b", "c"}, {"a", "b"}}));
  EXPECT_EQ(token_texts(bc_first, bc_first.encode("abc")), (Texts{"a", "bc"}));
  const Gpt2Tokenizer ab_first =
      Gpt2Tokenizer::from_contents(encoder, merges_file({{"a", "b"}, {"b", "c"}, {"ab", "c"}}));
  EXPECT_EQ(token_texts(ab_first, ab_first.encode("abc")), (Texts{"abc"}));
  EXPECT_EQ(token_texts(ab_first, ab_first.encode("bcab")), (Texts{"bc", "ab"}));
  EXPECT_EQ(ab_first.encode("abc"), (std::vector<std::int64_t>{258}));
  EXPECT_EQ(ab_first.merge_count(), 3);
  EXPECT_EQ(ab_first.vocab_size(), 259);
  EXPECT_EQ(ab_first.eot_id(), -1);
}

TEST(Gpt2Bpe, OverlappingPairsMergeLeftToRight) {
  const Gpt2Tokenizer t = Gpt2Tokenizer::from_contents(encoder_json({"aa", "aaaa"}),
                                                       merges_file({{"a", "a"}, {"aa", "aa"}}));
  EXPECT_EQ(token_texts(t, t.encode("aaa")), (Texts{"aa", "a"}));
  EXPECT_EQ(token_texts(t, t.encode("aaaa")), (Texts{"aaaa"}));
  EXPECT_EQ(token_texts(t, t.encode("aaaaaaa")), (Texts{"aaaa", "aa", "a"}));
}

TEST(Gpt2Bpe, MergesStayInsidePreTokenisationPieces) {
  const Gpt2Tokenizer t = Gpt2Tokenizer::from_contents(encoder_json({" a", "a ", "<|endoftext|>"}),
                                                       merges_file({{"a", " "}, {" ", "a"}}));
  // "a a" is cut into "a" and " a" first: the lower-ranked "a " never meets its space.
  EXPECT_EQ(token_texts(t, t.encode("a a")), (Texts{"a", " a"}));
  EXPECT_EQ(t.eot_id(), 258);
  EXPECT_EQ(t.decode(std::vector<std::int64_t>{258, 256}), "<|endoftext|> a");
}

TEST(Gpt2Bpe, AnyBytesRoundTrip) {
  const Gpt2Tokenizer t = Gpt2Tokenizer::from_contents(encoder_json({"ab", "\xC3\xA9"}),
                                                       merges_file({{"a", "b"}, {"\xC3", "\xA9"}}));
  Random random(5);
  for (int trial = 0; trial < 100; ++trial) {
    std::string text(random.below(100), '\0');
    for (char& c : text) c = static_cast<char>(random.below(256));
    EXPECT_EQ(t.decode(t.encode(text)), text);
  }
  EXPECT_EQ(token_texts(t, t.encode("caf\xC3\xA9 ab")), (Texts{"c", "a", "f", "\xC3\xA9", " ", "ab"}));
}

TEST(Gpt2Bpe, DecodeRefusesIdsOutsideTheVocabulary) {
  const Gpt2Tokenizer t = Gpt2Tokenizer::from_contents(encoder_json({}), merges_file({}));
  const std::string message = sublet::testing::message_of<ValueError>(
      [&] { t.decode(std::vector<std::int64_t>{1, 256}); });
  expect_mentions(message, {"token id 256", "[0, 256)"});
  EXPECT_THROW(t.decode(std::vector<std::int64_t>{-1}), ValueError);
}

std::string vocab_error(const std::string& encoder, const std::string& merges) {
  return sublet::testing::message_of<IoError>(
      [&] { Gpt2Tokenizer::from_contents(encoder, merges, "enc.json", "merges.bpe"); });
}

TEST(Gpt2Bpe, BadVocabularyFilesAreNamed) {
  const std::string good = encoder_json({"ab"});
  expect_mentions(vocab_error("{\"a\": ", merges_file({})), {"enc.json", "invalid JSON"});
  expect_mentions(vocab_error("[1, 2]", merges_file({})), {"enc.json", "JSON object", "array"});
  expect_mentions(vocab_error("{}", merges_file({})), {"enc.json", "non-empty"});
  std::string duplicate = good;
  duplicate.replace(duplicate.rfind("256"), 3, "255");
  expect_mentions(vocab_error(duplicate, merges_file({})), {"enc.json", "id 255", "two tokens"});
  std::string out_of_range = good;
  out_of_range.replace(out_of_range.rfind("256"), 3, "999");
  expect_mentions(vocab_error(out_of_range, merges_file({})), {"enc.json", "[0, 257)", "999"});
  std::string not_integer = good;
  not_integer.replace(not_integer.rfind("256"), 3, "\"x\"");
  expect_mentions(vocab_error(not_integer, merges_file({})), {"enc.json", "integer id"});
  expect_mentions(vocab_error("{\"a\": 0, \"\xE2\x82\xAC\": 1}", ""), {"enc.json", "U+20AC", "byte alphabet"});
  expect_mentions(vocab_error("{\"a\": 0}", ""), {"enc.json", "every byte", "byte 0"});
  expect_mentions(vocab_error(good, "#version: 0.2\na b c\n"), {"merges.bpe", "line 2", "two tokens", "3 fields"});
  expect_mentions(vocab_error(good, "#version: 0.2\nab c\n"), {"merges.bpe", "line 2", "\"ab\"", "earlier merge"});
  expect_mentions(vocab_error(good, merges_file({{"a", "b"}, {"b", "c"}})),
                  {"merges.bpe", "line 3", "\"b\" and \"c\"", "not a token"});
  expect_mentions(vocab_error(good, merges_file({{"a", "b"}, {"a", "b"}})), {"merges.bpe", "line 3", "twice"});
  expect_mentions(vocab_error(good, "#version: 0.2\nab\xE2\x82\xAC c\n"), {"merges.bpe", "line 2", "U+20AC"});
}

TEST(Gpt2Bpe, FilesAreReadAsRegularFiles) {
  ScratchDir dir;
  const std::string encoder = encoder_json({"ab"}), merges = merges_file({{"a", "b"}});
  sublet::testing::write_raw(dir / "encoder.json", {encoder.begin(), encoder.end()});
  sublet::testing::write_raw(dir / "vocab.bpe", {merges.begin(), merges.end()});
  EXPECT_EQ(Gpt2Tokenizer::from_folder(dir.path()).encode("ab"), (std::vector<std::int64_t>{256}));
  std::filesystem::remove(dir / "vocab.bpe");
  expect_mentions(io_error_of([&] { Gpt2Tokenizer::from_folder(dir.path()); }), {"vocab.bpe", "not found"});
}

// ---- GPT-2's own vocabulary (scripts/fetch_gpt2_bpe.sh puts it in data/gpt2-bpe) ----

std::filesystem::path gpt2_vocab_dir() {
  if (const char* dir = std::getenv("SUBLET_GPT2_BPE_DIR")) return dir;
  return kSourceDir / "data" / "gpt2-bpe";
}

// Loaded once for the tests below (a third of a second each time).
const Gpt2Tokenizer* load_gpt2_or_null() {
  static const std::unique_ptr<Gpt2Tokenizer> tokenizer = [] {
    const std::filesystem::path dir = gpt2_vocab_dir();
    if (!std::filesystem::exists(dir / "encoder.json") || !std::filesystem::exists(dir / "vocab.bpe")) {
      return std::unique_ptr<Gpt2Tokenizer>();
    }
    return std::make_unique<Gpt2Tokenizer>(Gpt2Tokenizer::from_folder(dir));
  }();
  return tokenizer.get();
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::int64_t> parse_ids(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::int64_t> ids;
  for (std::int64_t id; in >> id;) ids.push_back(id);
  return ids;
}

#define SKIP_WITHOUT_GPT2_VOCAB(tokenizer)                                                            \
  if (!(tokenizer)) {                                                                                 \
    GTEST_SKIP() << "GPT-2's encoder.json/vocab.bpe not in " << gpt2_vocab_dir()                      \
                 << " (scripts/fetch_gpt2_bpe.sh fetches them): would check token ids against npm's encoder"; \
  }

TEST(Gpt2BpeVocabulary, KnownIdsAndSizes) {
  const auto tokenizer = load_gpt2_or_null();
  SKIP_WITHOUT_GPT2_VOCAB(tokenizer);
  EXPECT_EQ(tokenizer->vocab_size(), 50257);
  EXPECT_EQ(tokenizer->merge_count(), 50000);
  EXPECT_EQ(tokenizer->eot_id(), 50256);
  EXPECT_EQ(tokenizer->encode("Hello world"), (std::vector<std::int64_t>{15496, 995}));
  EXPECT_EQ(tokenizer->decode(std::vector<std::int64_t>{50256}), "<|endoftext|>");
}

TEST(Gpt2BpeVocabulary, MatchesTheCheckedInIdsOfNpmsEncoder) {
  const auto tokenizer = load_gpt2_or_null();
  SKIP_WITHOUT_GPT2_VOCAB(tokenizer);
  const std::string text = read_text(kSourceDir / "tests/data/gpt2_bpe/sample.txt");
  const std::vector<std::int64_t> expected = parse_ids(read_text(kSourceDir / "tests/data/gpt2_bpe/sample_ids.txt"));
  ASSERT_TRUE(text.size() > 2000 && expected.size() > 1000) << "fixture missing or cut short";
  const std::vector<std::int64_t> ids = tokenizer->encode(text);
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(tokenizer->decode(ids), text);
}

TEST(Gpt2BpeVocabulary, RandomBytesRoundTrip) {
  const auto tokenizer = load_gpt2_or_null();
  SKIP_WITHOUT_GPT2_VOCAB(tokenizer);
  Random random(23);
  for (int trial = 0; trial < 50; ++trial) {
    std::string text(random.below(300), '\0');
    for (char& c : text) c = static_cast<char>(random.below(256));
    const std::vector<std::int64_t> ids = tokenizer->encode(text);
    for (const std::int64_t id : ids) ASSERT_TRUE(id >= 0 && id < 50257) << id;
    EXPECT_EQ(tokenizer->decode(ids), text);
  }
}

// Runs npm's encoder (node) on `file`; nullopt when node or the package's Encoder.js is missing.
std::optional<std::vector<std::int64_t>> npm_ids(const std::filesystem::path& file) {
  if (std::system("command -v node >/dev/null 2>&1") != 0) return std::nullopt;
  if (!std::filesystem::exists(gpt2_vocab_dir() / "Encoder.js")) return std::nullopt;
  const std::string command = "node '" + (kSourceDir / "tests/data/gpt2_bpe/encode_with_npm.js").string() +
                              "' '" + gpt2_vocab_dir().string() + "' '" + file.string() + "'";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), &::pclose);
  if (!pipe) return std::nullopt;
  std::string output;
  char buffer[65536];
  for (std::size_t got; (got = std::fread(buffer, 1, sizeof(buffer), pipe.get())) > 0;) output.append(buffer, got);
  return parse_ids(output);
}

TEST(Gpt2BpeVocabulary, MatchesNpmsEncoderLive) {
  const auto tokenizer = load_gpt2_or_null();
  SKIP_WITHOUT_GPT2_VOCAB(tokenizer);
  ScratchDir dir;
  std::vector<std::filesystem::path> files = {kSourceDir / "tests/data/gpt2_bpe/sample.txt"};
  // A few kilobytes of real prose and code: the first files of the default corpus.
  if (std::filesystem::is_directory(default_text_corpus_dir())) {
    std::string real;
    for (const auto& file : list_text_files(default_text_corpus_dir())) {
      real += read_text(file);
      if (real.size() > 12000) break;
    }
    sublet::testing::write_raw(dir / "corpus_head.txt", {real.begin(), real.end()});
    files.push_back(dir / "corpus_head.txt");
  }
  for (const auto& file : files) {
    const std::optional<std::vector<std::int64_t>> expected = npm_ids(file);
    if (!expected) GTEST_SKIP() << "node or " << gpt2_vocab_dir() / "Encoder.js" << " missing: would run npm's encoder";
    ASSERT_FALSE(expected->empty()) << "npm's encoder printed no ids for " << file;
    EXPECT_EQ(tokenizer->encode(read_text(file)), *expected) << file;
  }
}

}  // namespace
}  // namespace sublet::data
