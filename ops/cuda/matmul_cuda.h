#pragma once
// cuBLAS behind ops/matmul.h (same arguments, device pointers). Float32 and float64; bfloat16 and
// float16 with float32 accumulation.
#include "ops/matmul.h"

namespace sublet::ops::cuda {

void matmul(const Context& ctx, DType dtype, const MatmulGeometry& geometry, void* out, const void* a, const void* b);

}  // namespace sublet::ops::cuda
