#pragma once
// GPT-2's pre-tokenisation: the text is cut into pieces before byte-pair merging, by the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// written out by hand (the first alternative that matches at each position, greedily, as a
// regular expression engine takes it). Bytes that are not valid UTF-8 count as characters that
// are neither letters, numbers nor space, so every byte string is cut, and the pieces always
// concatenate back to the input.
#include <string_view>
#include <vector>

namespace sublet::data {

std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

}  // namespace sublet::data
