#pragma once
// The GELU in cuBLASLt's GEMM epilogues (ops/linear_gelu.h): CUBLASLT_EPILOGUE_GELU_AUX_BIAS
// forward, CUBLASLT_EPILOGUE_DGELU_BGRAD backward. Bfloat16 and float16, float32 accumulation.
#include "ops/linear_gelu.h"

namespace sublet::ops::cuda {

bool linear_gelu_forward(const Context& ctx, DType dtype, const GeluGemmGeometry& geometry, void* out, void* pre,
                         const void* x, const void* w, const void* bias);
bool linear_gelu_backward(const Context& ctx, DType dtype, const GeluGemmGeometry& geometry, void* grad_pre,
                          void* grad_bias, const void* grad_out, const void* w, const void* pre);

}  // namespace sublet::ops::cuda
