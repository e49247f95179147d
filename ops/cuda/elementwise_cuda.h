#pragma once
// CUDA element-wise kernels behind ops/elementwise.h (same arguments, device pointers).
#include "ops/elementwise.h"

namespace sublet::ops::cuda {

void unary(const Context& ctx, UnaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef in,
           UnaryParams params);
void binary(const Context& ctx, BinaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef a,
            ConstStridedRef b, double alpha);
void ternary(const Context& ctx, TernaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef a,
             ConstStridedRef b, ConstStridedRef c, double value);

}  // namespace sublet::ops::cuda
