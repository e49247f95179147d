#pragma once
// A linear layer with its bias in one call: out[m, n] = sum_k x[m, k] * w[n, k] + bias[n], all
// four contiguous (x [m, k], w [n, k], bias [n], out [m, n]). On CUDA the bias is added in the
// GEMM's epilogue (cuBLASLt), so it costs no kernel of its own.
#include <cstdint>

#include "core/dtype.h"
#include "ops/context.h"

namespace sublet::ops {

struct LinearBiasGeometry {
  std::int64_t m = 0, k = 0, n = 0;
};

// Whether this device and dtype have a fused kernel (float32 and float64 on CPU; float64,
// float32, bfloat16 and float16 on CUDA).
bool has_linear_bias(Device device, DType dtype);

// True when `out` was written. False when the kernel could not take this call (cuBLASLt found
// no algorithm for the shape, or an operand's alignment): the caller then runs matmul and add,
// and linear_bias_fallbacks() counts it. ShapeError for negative sizes; DTypeError where
// has_linear_bias is false.
bool linear_bias(const Context& ctx, DType dtype, const LinearBiasGeometry& geometry, void* out, const void* x,
                 const void* w, const void* bias);

// The weight and bias gradients of a 16-bit linear (bfloat16 or float16 grad_out and x), written
// in float32 for its float32 parameters: grad_w[n, k] = grad_out[m, n]^T x[m, k] and, unless
// grad_bias is null, grad_bias[n] = the column sums of grad_out. Accumulated in float32 and
// stored without a rounding to 16-bit. On CUDA one cuBLASLt GEMM with a float32 output, the bias
// gradient from its BGRADB epilogue. True when the outputs were written; false when the kernel
// could not take the call (no rows or an empty product, no algorithm, an operand's alignment):
// the caller then computes them in 16-bit and casts, and linear_bias_fallbacks() counts it.
// ShapeError for negative sizes; DTypeError where has_linear_weight_grad_float32 is false.
bool has_linear_weight_grad_float32(Device device, DType dtype);  // bfloat16 and float16 on CUDA
bool linear_weight_grad_float32(const Context& ctx, DType dtype, const LinearBiasGeometry& geometry, float* grad_w,
                                float* grad_bias, const void* grad_out, const void* x);

// Calls of linear_bias and linear_weight_grad_float32 that returned false, since the program started.
std::int64_t linear_bias_fallbacks();

}  // namespace sublet::ops
