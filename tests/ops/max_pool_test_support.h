#pragma once
// Max-pooling test helpers: inputs full of ties and special values, and the one-byte window
// positions (ops/pooling.h's max_pool2d_forward_positions) that the CPU's int64 indices stand
// for, to check the GPU's (or the vectorised work items') positions against the CPU kernel.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "ops/pooling.h"

namespace sublet::ops::testing {

// Values with many ties (integers in [-2, 2], zeros of both signs, whose sign shows which of
// two equal maxima won), NaNs, infinities and runs of -inf (windows whose every element is -inf).
inline std::vector<float> tied_input(std::int64_t count, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_int_distribution<int> value(-2, 2), special(0, 60);
  std::vector<float> values(static_cast<std::size_t>(count));
  for (float& v : values) {
    v = static_cast<float>(value(engine));
    switch (special(engine)) {
      case 0: v = std::numeric_limits<float>::quiet_NaN(); break;
      case 1: v = -std::numeric_limits<float>::quiet_NaN(); break;
      case 2: v = std::numeric_limits<float>::infinity(); break;
      case 3: v = -std::numeric_limits<float>::infinity(); break;
      case 4: v = -0.0f; break;
      default: break;
    }
  }
  // Runs of 300 span whole rows (and planes of the small shapes) in NCHW order.
  for (std::size_t i = 100; i + 300 < values.size(); i += 2000) {
    std::fill(values.begin() + static_cast<std::ptrdiff_t>(i), values.begin() + static_cast<std::ptrdiff_t>(i + 300),
              -std::numeric_limits<float>::infinity());
  }
  return values;
}

// indices: NCHW, h * W + w within each plane, as max_pool2d_forward writes them.
inline std::vector<std::uint8_t> positions_of(const Pool2dShape& s, const std::vector<std::int64_t>& indices) {
  std::vector<std::uint8_t> positions(indices.size());
  const std::int64_t oh_count = s.out_height(), ow_count = s.out_width();
  for (std::size_t o = 0; o < indices.size(); ++o) {
    const std::int64_t oh = (static_cast<std::int64_t>(o) / ow_count) % oh_count;
    const std::int64_t ow = static_cast<std::int64_t>(o) % ow_count;
    const std::int64_t ih = indices[o] / s.in_width, iw = indices[o] % s.in_width;
    const std::int64_t kh = (ih - (oh * s.stride_h - s.pad_h)) / s.dilation_h;
    const std::int64_t kw = (iw - (ow * s.stride_w - s.pad_w)) / s.dilation_w;
    positions[o] = static_cast<std::uint8_t>(kh * s.kernel_w + kw);
  }
  return positions;
}

}  // namespace sublet::ops::testing
