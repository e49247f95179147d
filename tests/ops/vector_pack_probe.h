#pragma once
// Device-side probes for tests/ops/test_cuda_vector_pack.cpp: the two-at-a-time 16-bit stores of
// ops/cuda/vector_pack.cuh (pack_from_floats) and the bit-level sign test of
// ops/cuda/half_types.cuh (is_positive), run in a kernel and returned as host data.
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace sublet::ops::testing {

// The 16-bit patterns pack_from_floats<T, 8> writes for `values` (bfloat16 or float16; the size
// is padded with zeros to a multiple of 8, and the padding is dropped from the result).
std::vector<std::uint16_t> pack_from_floats_bits(DType dtype, const std::vector<float>& values);

// is_positive<T> of every one of the 65,536 16-bit patterns (bfloat16 or float16), as 0/1.
std::vector<std::uint8_t> is_positive_flags(DType dtype);

}  // namespace sublet::ops::testing
