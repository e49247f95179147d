#pragma once
// The three character classes GPT-2's pre-tokenisation pattern is written in, with the meaning
// JavaScript's regular expressions give them (npm's GPT-2 encoders are the reference):
// \p{L} letters, \p{N} numbers, \s white space. Plus a strict UTF-8 decoder that reports each
// invalid byte on its own, so any byte string can be classified and tokenised.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sublet::data {

struct CodePointRange {
  char32_t first;
  char32_t last;  // inclusive
};

bool is_unicode_letter(char32_t code_point);   // \p{L}
bool is_unicode_number(char32_t code_point);   // \p{N}
bool is_js_whitespace(char32_t code_point);    // \s: ECMAScript WhiteSpace and LineTerminator

// A code point that is none of the three (nor a decodable character at all).
inline constexpr char32_t kInvalidUtf8 = 0xFFFFFFFF;

struct DecodedChar {
  char32_t code_point;  // kInvalidUtf8 for a byte that starts no valid UTF-8 sequence
  std::size_t length;   // bytes consumed, 1 to 4
};

// The character starting at text[offset] (offset < text.size()). Overlong forms, surrogates,
// code points past U+10FFFF and cut-off sequences are invalid: one byte is consumed.
DecodedChar decode_utf8_at(std::string_view text, std::size_t offset);

}  // namespace sublet::data
