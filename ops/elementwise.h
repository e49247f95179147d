#pragma once
// Elementwise kernels over strided operands that share one iteration shape (the runtime has
// already broadcast them: stride 0 on broadcast dimensions). `out` may alias an input with the
// same strides (in-place ops). Dispatches by ctx.device.
#include "ops/context.h"
#include "core/dtype.h"
#include "ops/strided.h"

namespace sublet::ops {

enum class UnaryOp {
  Neg,
  Relu,
  Exp,
  Log,
  Sqrt,
  Pow,        // x ^ a
  Clamp,      // min(max(x, a), b)
  AddScalar,  // x + a
  MulScalar,  // x * a
  DivScalar,  // x / a (exact for int64, unlike multiplying by 1/a)
  Positive,   // 1 where x > 0 else 0 (relu's derivative)
  InRange,    // 1 where a <= x <= b else 0 (clamp's derivative)
  Sigmoid,
  Tanh,
};

struct UnaryParams {
  double a = 0.0;
  double b = 0.0;
};

// Float-only ops (exp, log, sqrt, pow, sigmoid, tanh) must not be called on int64: the runtime
// checks and throws DTypeError naming the op.
bool unary_needs_floating(UnaryOp op);

void unary(const Context& ctx, UnaryOp op, DType dtype, const Shape& sizes, StridedRef out,
           ConstStridedRef in, UnaryParams params = {});

enum class BinaryOp {
  Add,      // a + alpha * b
  Sub,      // a - alpha * b
  Mul,
  Div,
  Maximum,
  Minimum,
  Equal,    // 1 where a == b else 0, in the operands' dtype
  ReluBackward,  // a where b > 0 else 0: relu's gradient in one pass (a = grad, b = relu's output),
                 // PyTorch's threshold_backward; 0, not NaN, where b <= 0 even if a is inf or NaN
};

void binary(const Context& ctx, BinaryOp op, DType dtype, const Shape& sizes, StridedRef out,
            ConstStridedRef a, ConstStridedRef b, double alpha = 1.0);

// out = a + value * b * c (Adam's and RMSprop's addcmul) and out = a + value * b / c (addcdiv).
enum class TernaryOp { AddCMul, AddCDiv };
void ternary(const Context& ctx, TernaryOp op, DType dtype, const Shape& sizes, StridedRef out,
             ConstStridedRef a, ConstStridedRef b, ConstStridedRef c, double value);

}  // namespace sublet::ops
