#pragma once
// The dtype that a reduction over a tensor's elements keeps its statistics and scalars in:
// float64 for float64 tensors (gradcheck's precision), float32 for float32 and the 16-bit types
// (their range and precision are too small for sums of thousands of terms).
#include "core/dtype.h"

namespace sublet::ops {

constexpr DType accumulate_dtype(DType dtype) { return dtype == DType::Float64 ? DType::Float64 : DType::Float32; }

}  // namespace sublet::ops
