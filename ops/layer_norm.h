#pragma once
// Layer normalisation over the last `cols` elements of each of `rows` rows (row-major), as
// torch.nn.functional.layer_norm: y = (x - mean) * rstd * weight + bias with the biased variance,
// rstd = 1 / sqrt(var + eps). weight and bias ([cols], the input's dtype) may each be null.
// The forward saves mean and rstd per row in accumulate_dtype(dtype) (ops/accumulate_dtype.h):
// float32 for float32 and 16-bit inputs, float64 for float64; backward reuses them.
#include <cstdint>

#include "core/dtype.h"
#include "ops/context.h"

namespace sublet::ops {

struct LayerNormShape {
  std::int64_t rows = 0, cols = 0;

  void validate(const char* op) const;  // throws ShapeError naming op and the sizes
};

// The general form, one pass each way, for the fused paths (CUDA kernels only: ask
// layer_norm_fused_available; the fronts compose the plain ops elsewhere). Forward: with `branch` given, the row input is input + branch rounded
// to `dtype` (written to `sum`), as a residual add followed by the norm; the output may be in a
// 16-bit `output_dtype` while input, weight, bias and the statistics stay in `dtype`, as float32
// layer norm followed by a cast. branch has output_dtype.
struct LayerNormForwardArgs {
  LayerNormShape shape;
  DType dtype = DType::Float32;         // input, branch sum, weight, bias
  DType output_dtype = DType::Float32;  // output and branch: dtype, or a 16-bit type when dtype is float32
  const void* input = nullptr;
  const void* branch = nullptr;  // may be null: no residual add
  const void* weight = nullptr;
  const void* bias = nullptr;
  double eps = 1e-5;
  void* sum = nullptr;  // input + branch (dtype), needed with branch
  void* output = nullptr;
  void* mean = nullptr;
  void* rstd = nullptr;
};

// Backward of the above: grad_output in output_dtype, input (the normalised rows: the sum with a
// branch) and the gradients in dtype. grad_sum (dtype, may be null) is the residual path's
// gradient, added to the input gradient; grad_branch (output_dtype, may be null) receives that
// total rounded to output_dtype, the branch's gradient.
struct LayerNormBackwardArgs {
  LayerNormShape shape;
  DType dtype = DType::Float32;
  DType output_dtype = DType::Float32;
  const void* grad_output = nullptr;
  const void* grad_sum = nullptr;
  const void* input = nullptr;
  const void* weight = nullptr;
  const void* mean = nullptr;
  const void* rstd = nullptr;
  void* grad_input = nullptr;
  void* grad_branch = nullptr;
  void* grad_weight = nullptr;
  void* grad_bias = nullptr;
};

void layer_norm_forward(const Context& ctx, const LayerNormShape& shape, DType dtype, const void* input,
                        const void* weight, const void* bias, double eps, void* output, void* mean, void* rstd);
// Each of grad_input, grad_weight, grad_bias may be null (not wanted); those given are overwritten.
// grad_weight needs weight (and its rows' sum of grad_output * xhat); grad_input uses weight when given.
void layer_norm_backward(const Context& ctx, const LayerNormShape& shape, DType dtype, const void* grad_output,
                         const void* input, const void* weight, const void* mean, const void* rstd,
                         void* grad_input, void* grad_weight, void* grad_bias);

// Whether `device` has the general kernels for this pair: output_dtype equal to dtype, or
// bfloat16/float16 for a float32 dtype.
bool layer_norm_fused_available(DeviceType device, DType dtype, DType output_dtype);
// The general forms; DTypeError where layer_norm_fused_available is false.
void layer_norm_fused_forward(const Context& ctx, const LayerNormForwardArgs& args);
void layer_norm_fused_backward(const Context& ctx, const LayerNormBackwardArgs& args);

}  // namespace sublet::ops
