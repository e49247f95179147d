#pragma once
// The linear with bias on cuBLASLt (ops/linear_bias.h): one GEMM whose epilogue adds the bias.
// Float64, float32 (full float32 compute, no TF32), bfloat16 and float16 (float32 accumulation).
#include "ops/linear_bias.h"

namespace sublet::ops::cuda {

bool linear_bias(const Context& ctx, DType dtype, const LinearBiasGeometry& geometry, void* out, const void* x,
                 const void* w, const void* bias);

// The float32 weight (and bias) gradient of a bfloat16/float16 linear: one GEMM with 16-bit A and
// B and a float32 D (compute and scale float32), the bias gradient from the BGRADB epilogue.
bool linear_weight_grad_float32(const Context& ctx, DType dtype, const LinearBiasGeometry& geometry, float* grad_w,
                                float* grad_bias, const void* grad_out, const void* x);

}  // namespace sublet::ops::cuda
