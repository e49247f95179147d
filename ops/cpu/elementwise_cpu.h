#pragma once
#include "ops/elementwise.h"

namespace sublet::ops::cpu {

void unary(UnaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef in, UnaryParams params);
void binary(BinaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef a, ConstStridedRef b,
            double alpha);
void ternary(TernaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef a, ConstStridedRef b,
             ConstStridedRef c, double value);

}  // namespace sublet::ops::cpu
