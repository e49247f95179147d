// GPT-2's pre-tokenisation and the character classes under it: the UTF-8 decoder's edge cases,
// spot checks of \p{L}, \p{N} and \s, and the pieces the pattern cuts, worked out by hand from
// the regular expression (first matching alternative, greedy, with \s+(?!\S) backing off).
#include <gtest/gtest.h>

#include <string>

#include "core/random.h"
#include "runtime/data/gpt2_pretokenize.h"
#include "runtime/data/unicode_classes.h"

namespace sublet::data {
namespace {

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  std::string joined;
  for (const std::string_view piece : gpt2_pretokenize(text)) {
    EXPECT_FALSE(piece.empty());
    out.emplace_back(piece);
    joined += piece;
  }
  EXPECT_EQ(joined, text) << "the pieces must concatenate back to the input";
  return out;
}

using Pieces = std::vector<std::string>;

TEST(Utf8Decode, ValidAndInvalidSequences) {
  const auto decode = [](std::string_view s) { return decode_utf8_at(s, 0); };
  EXPECT_EQ(decode("A").code_point, U'A');
  EXPECT_EQ(decode("\xC3\xA9").code_point, U'\u00E9');
  EXPECT_EQ(decode("\xC3\xA9").length, 2u);
  EXPECT_EQ(decode("\xE4\xB8\xAD").code_point, U'\u4E2D');
  EXPECT_EQ(decode("\xF0\x9F\x99\x82").code_point, U'\U0001F642');
  EXPECT_EQ(decode("\xF0\x9F\x99\x82").length, 4u);
  for (const std::string_view bad : {std::string_view("\xC0\x80"), std::string_view("\xE0\x80\x80"),
                                     std::string_view("\xED\xA0\x80"), std::string_view("\xF4\x90\x80\x80"),
                                     std::string_view("\xE2\x82"), std::string_view("\x80"),
                                     std::string_view("\xFF"), std::string_view("\xC3\x41")}) {
    EXPECT_EQ(decode(bad).code_point, kInvalidUtf8) << "bytes of length " << bad.size();
    EXPECT_EQ(decode(bad).length, 1u);
  }
}

TEST(UnicodeClasses, SpotChecks) {
  for (const char32_t c : {U'a', U'Z', U'\u00E9', U'\u00DF', U'\u03A9', U'\u4E2D', U'\u3072', U'\u0416',
                           U'\u05D0', U'\u00AA', U'\U00020000'}) {
    EXPECT_TRUE(is_unicode_letter(c)) << std::hex << static_cast<unsigned>(c);
    EXPECT_FALSE(is_unicode_number(c));
  }
  for (const char32_t c : {U'0', U'9', U'\u0663', U'\u216B', U'\u00BD', U'\u00B2', U'\u0966'}) {
    EXPECT_TRUE(is_unicode_number(c)) << std::hex << static_cast<unsigned>(c);
    EXPECT_FALSE(is_unicode_letter(c));
  }
  for (const char32_t c : {U' ', U'\t', U'\n', U'\v', U'\f', U'\r', U'\u00A0', U'\u2009', U'\u3000',
                           U'\u2028', U'\uFEFF'}) {
    EXPECT_TRUE(is_js_whitespace(c)) << std::hex << static_cast<unsigned>(c);
  }
  // Combining marks, format characters, symbols, NEL and the last code point are none of them.
  for (const char32_t c : {U'\u0301', U'\u200B', U'\u0085', U'!', U'\U0001F642', U'\u20AC', U'_',
                           U'\U0010FFFF', U'\u001C'}) {
    EXPECT_FALSE(is_unicode_letter(c) || is_unicode_number(c) || is_js_whitespace(c))
        << std::hex << static_cast<unsigned>(c);
  }
}

TEST(Gpt2Pretokenize, WordsNumbersAndPunctuationTakeOneLeadingSpace) {
  EXPECT_EQ(pieces("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(pieces("12 345 6.5"), (Pieces{"12", " 345", " 6", ".", "5"}));
  EXPECT_EQ(pieces("a, b"), (Pieces{"a", ",", " b"}));
  EXPECT_EQ(pieces("x ,,!? y"), (Pieces{"x", " ,,!?", " y"}));
  EXPECT_EQ(pieces("abc123def"), (Pieces{"abc", "123", "def"}));
  EXPECT_EQ(pieces("naïve café"), (Pieces{"naïve", " café"}));
  EXPECT_EQ(pieces("cafe\xCC\x81!"), (Pieces{"cafe", "\xCC\x81!"}));  // a combining mark is "other"
  EXPECT_EQ(pieces("x \xF0\x9F\x99\x82!"), (Pieces{"x", " \xF0\x9F\x99\x82!"}));
  EXPECT_EQ(pieces("中文 text"), (Pieces{"中文", " text"}));
}

TEST(Gpt2Pretokenize, ContractionsAreLowerCaseOnly) {
  EXPECT_EQ(pieces("It's"), (Pieces{"It", "'s"}));
  EXPECT_EQ(pieces("we're you've they'll I'm he'd don't"),
            (Pieces{"we", "'re", " you", "'ve", " they", "'ll", " I", "'m", " he", "'d", " don", "'t"}));
  EXPECT_EQ(pieces("WE'RE"), (Pieces{"WE", "'", "RE"}));
  EXPECT_EQ(pieces("''s"), (Pieces{"''", "s"}));     // the run of "other" takes both quotes
  EXPECT_EQ(pieces("'sound"), (Pieces{"'s", "ound"}));
  EXPECT_EQ(pieces("'"), (Pieces{"'"}));
  EXPECT_EQ(pieces("'l"), (Pieces{"'", "l"}));
}

TEST(Gpt2Pretokenize, SpaceRunsLeaveTheirLastSpaceToTheNextWord) {
  EXPECT_EQ(pieces("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(pieces("a    b"), (Pieces{"a", "   ", " b"}));
  EXPECT_EQ(pieces("a   "), (Pieces{"a", "   "}));
  EXPECT_EQ(pieces("x\n\ny"), (Pieces{"x", "\n", "\n", "y"}));
  EXPECT_EQ(pieces("x\n\n"), (Pieces{"x", "\n\n"}));
  EXPECT_EQ(pieces("  \t x"), (Pieces{"  \t", " x"}));
  EXPECT_EQ(pieces("a\tb"), (Pieces{"a", "\t", "b"}));
  EXPECT_EQ(pieces(" "), (Pieces{" "}));
  EXPECT_EQ(pieces("a\xC2\xA0\xC2\xA0" "b"), (Pieces{"a", "\xC2\xA0", "\xC2\xA0", "b"}));
  EXPECT_EQ(pieces("\n    def"), (Pieces{"\n   ", " def"}));
}

TEST(Gpt2Pretokenize, InvalidBytesAreOtherCharacters) {
  EXPECT_EQ(pieces("\xFF\xFE" "ab \x80"), (Pieces{"\xFF\xFE", "ab", " \x80"}));
  EXPECT_EQ(pieces(std::string_view("a\0b", 3)), (Pieces{"a", std::string("\0", 1), "b"}));
  EXPECT_TRUE(gpt2_pretokenize("").empty());
}

TEST(Gpt2Pretokenize, RandomBytesAlwaysConcatenateBack) {
  Random random(17);
  for (int trial = 0; trial < 200; ++trial) {
    std::string text(random.below(64), '\0');
    // Bytes drawn from a small alphabet of the interesting kinds, so runs and edges meet often.
    static constexpr unsigned char kAlphabet[] = {' ', ' ', '\n', '\t', 'a', 'Z', '1', '\'', 's', 'l',
                                                  ',', 0xC3, 0xA9, 0xE3, 0x80, 0x80, 0xFF};
    for (char& c : text) c = static_cast<char>(kAlphabet[random.below(sizeof(kAlphabet))]);
    pieces(text);
  }
}

}  // namespace
}  // namespace sublet::data
