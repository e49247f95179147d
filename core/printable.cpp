#include "core/printable.h"

#include <cstdio>

namespace sublet {

std::string printable(std::string_view text, std::size_t max_chars) {
  std::string out;
  std::size_t shown = 0;
  for (; shown < text.size() && out.size() < max_chars; ++shown) {
    const auto c = static_cast<unsigned char>(text[shown]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == 0xc2 && shown + 1 < text.size() && static_cast<unsigned char>(text[shown + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[shown + 1]) <= 0x9f) {
      // U+0080-U+009F, the C1 controls in UTF-8: some terminals act on them as on ESC sequences.
      char code[16];
      std::snprintf(code, sizeof(code), "\\u%04x", static_cast<unsigned char>(text[++shown]));
      out += code;
    } else if (c < 0x20 || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof(code), "\\x%02x", c);
      out += code;
    } else {
      out += static_cast<char>(c);  // UTF-8 bytes pass: the controls are handled above
    }
  }
  if (shown < text.size()) out += "... (" + std::to_string(text.size()) + " bytes in all)";
  return out;
}

}  // namespace sublet
