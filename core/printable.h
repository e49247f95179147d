#pragma once
// Text from an untrusted file or the environment, made safe to print: control characters
// (an ESC sequence would recolour or rewrite the terminal) are escaped as \xNN, \n, \t, and a
// long value is shortened, saying how long it was.
#include <cstddef>
#include <string>
#include <string_view>

namespace sublet {

inline constexpr std::size_t kPrintableMaxChars = 200;

std::string printable(std::string_view text, std::size_t max_chars = kPrintableMaxChars);

}  // namespace sublet
