#pragma once
// The CPU linear with bias (ops/linear_bias.h): the CPU matmul, then the bias added row by row.
// The reference the CUDA epilogue is checked against. Float32 and float64.
#include "ops/linear_bias.h"

namespace sublet::ops::cpu {

template <typename T>
bool linear_bias(const Context& ctx, DType dtype, const LinearBiasGeometry& geometry, void* out, const void* x,
                 const void* w, const void* bias);

}  // namespace sublet::ops::cpu
