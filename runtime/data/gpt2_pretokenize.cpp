#include "runtime/data/gpt2_pretokenize.h"

#include <cstddef>

#include "runtime/data/unicode_classes.h"

namespace sublet::data {
namespace {

enum class CharClass { letter, number, space, other };

CharClass classify(char32_t c) {
  if (c == kInvalidUtf8) return CharClass::other;
  if (is_js_whitespace(c)) return CharClass::space;
  if (is_unicode_letter(c)) return CharClass::letter;
  if (is_unicode_number(c)) return CharClass::number;
  return CharClass::other;
}

struct Cursor {
  std::string_view text;

  CharClass class_at(std::size_t i) const { return classify(decode_utf8_at(text, i).code_point); }
  std::size_t length_at(std::size_t i) const { return decode_utf8_at(text, i).length; }

  // End of the run of characters of class `kind` starting at `i`.
  std::size_t run_end(std::size_t i, CharClass kind) const {
    while (i < text.size()) {
      const DecodedChar c = decode_utf8_at(text, i);
      if (classify(c.code_point) != kind) break;
      i += c.length;
    }
    return i;
  }
};

// 's 't 'm 'd 're 've 'll: the length of the contraction at `i`, or 0.
std::size_t contraction_length(std::string_view text, std::size_t i) {
  if (text[i] != '\'' || i + 1 >= text.size()) return 0;
  const char a = text[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= text.size()) return 0;
  const char b = text[i + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// The length of the piece starting at `i`.
std::size_t piece_length(const Cursor& cursor, std::size_t i) {
  const std::string_view text = cursor.text;
  if (const std::size_t n = contraction_length(text, i)) return n;
  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional ASCII space, then a run of one class.
  std::size_t body = i;
  if (text[i] == ' ' && i + 1 < text.size()) body = i + 1;
  const CharClass body_class = cursor.class_at(body);
  if (body_class != CharClass::space) return cursor.run_end(body, body_class) - i;
  // "\s+(?!\S)": the run of space, less its last character when a non-space follows it, so that
  // the last space joins the next word; "\s+" when that would leave nothing.
  const std::size_t end = cursor.run_end(i, CharClass::space);
  if (end == text.size()) return end - i;
  const std::size_t first_length = cursor.length_at(i);
  if (end - i == first_length) return first_length;
  std::size_t last_start = i;
  for (std::size_t j = i; j < end; j += cursor.length_at(j)) last_start = j;
  return last_start - i;
}

}  // namespace

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  const Cursor cursor{text};
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t length = piece_length(cursor, i);
    pieces.push_back(text.substr(i, length));
    i += length;
  }
  return pieces;
}

}  // namespace sublet::data
