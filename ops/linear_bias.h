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

// Calls of linear_bias that returned false, since the program started.
std::int64_t linear_bias_fallbacks();

}  // namespace sublet::ops
