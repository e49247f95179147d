#include "runtime/data/unicode_classes.h"

#include <algorithm>
#include <iterator>
#include <span>

namespace sublet::data {
namespace {

#include "runtime/data/unicode_classes_table.inc"

bool in_ranges(std::span<const CodePointRange> ranges, char32_t code_point) {
  // The first range whose end is at or past the code point is the only one that can hold it.
  const auto it = std::lower_bound(
      ranges.begin(), ranges.end(), code_point,
      [](const CodePointRange& range, char32_t value) { return range.last < value; });
  return it != ranges.end() && it->first <= code_point;
}

}  // namespace

bool is_unicode_letter(char32_t code_point) {
  return in_ranges(kLetterRanges, code_point);
}

bool is_unicode_number(char32_t code_point) {
  return in_ranges(kNumberRanges, code_point);
}

bool is_js_whitespace(char32_t c) {
  switch (c) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000: case 0xFEFF:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

DecodedChar decode_utf8_at(std::string_view text, std::size_t offset) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[offset + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {lead, 1};
  std::size_t length = 0;
  char32_t code_point = 0;
  char32_t minimum = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, code_point = lead & 0x1F, minimum = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, code_point = lead & 0x0F, minimum = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, code_point = lead & 0x07, minimum = 0x10000;
  } else {
    return {kInvalidUtf8, 1};
  }
  if (text.size() - offset < length) return {kInvalidUtf8, 1};
  for (std::size_t i = 1; i < length; ++i) {
    const unsigned char next = byte(i);
    if ((next & 0xC0) != 0x80) return {kInvalidUtf8, 1};
    code_point = (code_point << 6) | (next & 0x3F);
  }
  const bool surrogate = code_point >= 0xD800 && code_point <= 0xDFFF;
  if (code_point < minimum || code_point > 0x10FFFF || surrogate) return {kInvalidUtf8, 1};
  return {code_point, length};
}

}  // namespace sublet::data
