#pragma once
#include "ops/elementwise.h"

namespace sublet::ops::cpu {

// Templates on the element type with the op's kernel signature (ops/elementwise_kernels.h), so that
// ops/cpu/register_cpu_kernels.cpp registers one instantiation per dtype; ctx and dtype are unused here.
// Instantiated for float, double and int64 (ternary: float and double).
template <typename T>
void unary(const Context& ctx, UnaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef in,
           UnaryParams params);
template <typename T>
void binary(const Context& ctx, BinaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef a,
            ConstStridedRef b, double alpha);
template <typename T>
void ternary(const Context& ctx, TernaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef a,
             ConstStridedRef b, ConstStridedRef c, double value);

}  // namespace sublet::ops::cpu
