#include "ops/elementwise.h"

#include "core/errors.h"
#include "ops/cpu/elementwise_cpu.h"
#ifdef SUBLET_HAVE_CUDA
#include "ops/cuda/elementwise_cuda.h"
#endif

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

// Dispatch point: CUDA kernels go beside the CPU ones (ops/cuda/) and are selected here.
void unary(const Context& ctx, UnaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef in,
           UnaryParams params) {
  switch (ctx.device.type) {
    case DeviceType::CPU: return cpu::unary(op, dtype, sizes, std::move(out), std::move(in), params);
    case DeviceType::CUDA:
#ifdef SUBLET_HAVE_CUDA
      return cuda::unary(ctx, op, dtype, sizes, std::move(out), std::move(in), params);
#endif
      break;
  }
  throw DeviceError("elementwise unary op: no kernel for " + ctx.device.str() + " yet");
}

void binary(const Context& ctx, BinaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef a,
            ConstStridedRef b, double alpha) {
  switch (ctx.device.type) {
    case DeviceType::CPU: return cpu::binary(op, dtype, sizes, std::move(out), std::move(a), std::move(b), alpha);
    case DeviceType::CUDA:
#ifdef SUBLET_HAVE_CUDA
      return cuda::binary(ctx, op, dtype, sizes, std::move(out), std::move(a), std::move(b), alpha);
#endif
      break;
  }
  throw DeviceError("elementwise binary op: no kernel for " + ctx.device.str() + " yet");
}

void ternary(const Context& ctx, TernaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef a,
             ConstStridedRef b, ConstStridedRef c, double value) {
  switch (ctx.device.type) {
    case DeviceType::CPU:
      return cpu::ternary(op, dtype, sizes, std::move(out), std::move(a), std::move(b), std::move(c), value);
    case DeviceType::CUDA:
#ifdef SUBLET_HAVE_CUDA
      return cuda::ternary(ctx, op, dtype, sizes, std::move(out), std::move(a), std::move(b), std::move(c), value);
#endif
      break;
  }
  throw DeviceError("elementwise ternary op: no kernel for " + ctx.device.str() + " yet");
}

}  // namespace sublet::ops
