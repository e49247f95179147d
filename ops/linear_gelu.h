#pragma once
// The tanh GELU of an MLP (GPT-2's c_fc -> GELU -> c_proj) run in GEMM epilogues, one GEMM each
// way, instead of kernels of its own:
//   forward:  pre = x w^T + bias and out = gelu(pre)  (the GEMM of the first linear; pre is kept
//             for backward)
//   backward: grad_pre = (grad_out w) * gelu'(pre) and grad_bias = the column sums of grad_pre
//             (the GEMM that gives the second linear's input gradient; w is that linear's weight)
// so neither gelu(pre)'s gradient nor a separate bias-gradient pass ever exists. GELU is the tanh
// approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (ops/gelu_math.h). Operands are
// row-major and contiguous. Kernels on CUDA (cuBLASLt) for bfloat16 and float16, which compute in
// float32; float32 and float64 keep the separate GELU kernels.
#include <cstdint>

#include "core/dtype.h"
#include "ops/context.h"

namespace sublet::ops {

// m rows; k the GEMM's inner size (the first linear's in_features forward, the second's
// out_features backward); n the GELU's width (the hidden features).
struct GeluGemmGeometry {
  std::int64_t m = 0, k = 0, n = 0;
};

// Whether the epilogues can take a hidden width of n at all: cuBLASLt wants the pre-activation's
// leading dimension (n) a multiple of 8.
bool gelu_epilogue_fits(std::int64_t n);

// Whether this device and dtype have the fused kernels (bfloat16 and float16 on CUDA).
bool has_linear_gelu(Device device, DType dtype);

// out[m, n] = gelu(pre[m, n]), pre = x[m, k] w[n, k]^T + bias[n]. True when out and pre were
// written; false when the kernel could not take the call (n not fitting, no algorithm for the
// shape, an operand's alignment): the caller then runs linear and GELU apart, and
// linear_gelu_fallbacks() counts it. ShapeError for negative sizes; DTypeError where
// has_linear_gelu is false.
bool linear_gelu_forward(const Context& ctx, DType dtype, const GeluGemmGeometry& geometry, void* out, void* pre,
                         const void* x, const void* w, const void* bias);

// grad_pre[m, n] = (grad_out[m, k] w[k, n]) * gelu'(pre[m, n]); grad_bias[n] = the sum over the
// m rows of grad_pre. True and false, errors and counting as linear_gelu_forward.
bool linear_gelu_backward(const Context& ctx, DType dtype, const GeluGemmGeometry& geometry, void* grad_pre,
                          void* grad_bias, const void* grad_out, const void* w, const void* pre);

// Calls of linear_gelu_forward and linear_gelu_backward that returned false, since the program
// started.
std::int64_t linear_gelu_fallbacks();

}  // namespace sublet::ops
