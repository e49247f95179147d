#pragma once
// The one reader of an image shape given on the command line (--input of bench step and profile,
// --synthetic-shape of train), so that every command takes the same text and refuses a bad one
// with the same message.
#include <cstdint>
#include <string>

namespace sublet::cli {

struct ImageShape {
  std::int64_t channels = 0, height = 0, width = 0;
};

// Sizes above this are refused while reading: they fit every int the kernels index with.
inline constexpr std::int64_t kMaxImageShapeSize = 2147483647;

// "CxHxW", e.g. "3x32x32": three positive integers joined by 'x', nothing else (no spaces, signs
// or empty parts). Otherwise a ValueError such as
//   --input: expected CxHxW with positive integers, e.g. 3x32x32; found "3x32"
// where `flag` is the flag the text came from.
ImageShape parse_image_shape(const std::string& flag, const std::string& text);

}  // namespace sublet::cli
