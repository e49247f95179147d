#pragma once
// The linear with bias on cuBLASLt (ops/linear_bias.h): one GEMM whose epilogue adds the bias.
// Float64, float32 (full float32 compute, no TF32), bfloat16 and float16 (float32 accumulation).
#include "ops/linear_bias.h"

namespace sublet::ops::cuda {

bool linear_bias(const Context& ctx, DType dtype, const LinearBiasGeometry& geometry, void* out, const void* x,
                 const void* w, const void* bias);

}  // namespace sublet::ops::cuda
