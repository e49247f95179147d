#pragma once
// Gradient clipping by one global norm over a list of tensors in a few launches for the whole
// list, as PyTorch's torch._foreach_norm + torch._foreach_mul_ inside clip_grad_norm_:
//
//   multi_tensor_norm        writes the norm of all the tensors taken together to `norm`, one
//                            scalar of `norm_dtype` in the context device's memory (host memory
//                            on the CPU): (sum |x|^p)^(1/p), or max |x| for p = infinity.
//   multi_tensor_clip_scale  multiplies every tensor in place by
//                            min(1, max_norm / (*norm + 1e-6)), read from `norm` when it runs.
//
// Neither reads anything back to the host, so a CUDA graph can capture both: the norm stays on
// the device and the scale is computed there. Tensors may mix float32, bfloat16 and float16
// (and float64 with a float64 norm): each is read in its own dtype. The sum is deterministic:
// on CUDA, float32 (float64 for a float64 norm) partial sums of fixed chunks, added in a fixed
// order in float64; on the CPU, one float64 sum. The norm is rounded once to `norm_dtype`.
//
// The scale is PyTorch's: coefficient = (1 / (norm + 1e-6)) * max_norm in norm_dtype (PyTorch's
// `max_norm / tensor` is a reciprocal and a multiply), clamped to at most 1 (NaN stays NaN), then
// rounded to each tensor's dtype and multiplied in that dtype's compute type (float32 for the
// 16-bit types). A coefficient of exactly 1 leaves the tensors untouched (x * 1 == x for every
// finite x, and a norm of 1 or less means every element is finite).
#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "ops/context.h"

namespace sublet::ops {

// One dense array of `numel` elements of `dtype` (float32, float64, bfloat16 or float16).
struct NormTensor {
  void* data = nullptr;  // only read by multi_tensor_norm
  std::int64_t numel = 0;
  DType dtype = DType::Float32;
};

// norm_type: p >= 1, or infinity. norm_dtype: float32 or float64 (float64 tensors need float64).
void multi_tensor_norm(const Context& ctx, DType norm_dtype, std::span<const NormTensor> tensors, double norm_type,
                       void* norm);
// max_norm >= 0; `norm` is one scalar of norm_dtype, e.g. written by multi_tensor_norm.
void multi_tensor_clip_scale(const Context& ctx, DType norm_dtype, std::span<const NormTensor> tensors,
                             const void* norm, double max_norm);

}  // namespace sublet::ops
