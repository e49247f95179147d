#include "ops/elementwise.h"

#include "core/errors.h"
#include "ops/elementwise_kernels.h"

namespace sublet::ops {

bool unary_needs_floating(UnaryOp op) {
  switch (op) {
    case UnaryOp::Exp: case UnaryOp::Log: case UnaryOp::Sqrt: case UnaryOp::Pow:
    case UnaryOp::Sigmoid: case UnaryOp::Tanh:
      return true;
    default:
      return false;
  }
}

void unary(const Context& ctx, UnaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef in,
           UnaryParams params) {
  unary_kernels().get("elementwise unary op", ctx.device, dtype)(ctx, op, dtype, sizes, std::move(out), std::move(in),
                                                                 params);
}

void binary(const Context& ctx, BinaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef a,
            ConstStridedRef b, double alpha) {
  binary_kernels().get("elementwise binary op", ctx.device, dtype)(ctx, op, dtype, sizes, std::move(out),
                                                                   std::move(a), std::move(b), alpha);
}

void ternary(const Context& ctx, TernaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef a,
             ConstStridedRef b, ConstStridedRef c, double value) {
  ternary_kernels().get(op == TernaryOp::AddCMul ? "addcmul" : "addcdiv", ctx.device, dtype)(
      ctx, op, dtype, sizes, std::move(out), std::move(a), std::move(b), std::move(c), value);
}

}  // namespace sublet::ops
