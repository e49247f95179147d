#include "ops/multi_tensor_norm.h"

#include <cmath>
#include <string>

#include "core/errors.h"
#include "ops/multi_tensor_norm_kernels.h"

namespace sublet::ops {
namespace {

bool readable_dtype(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::BFloat16 || dtype == DType::Float16;
}

void check_tensors(const char* op, DType norm_dtype, std::span<const NormTensor> tensors) {
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const NormTensor& t = tensors[i];
    const std::string which = std::string(op) + ": tensor " + std::to_string(i);
    if (!readable_dtype(t.dtype))
      throw DTypeError(which + ": expected float32, float64, bfloat16 or float16, got " + dtype_name(t.dtype));
    if (t.dtype == DType::Float64 && norm_dtype != DType::Float64)
      throw DTypeError(which + " is float64: expected a float64 norm, got " + dtype_name(norm_dtype));
    if (t.numel < 0) throw ValueError(which + " has a negative element count (" + std::to_string(t.numel) + ")");
    if (t.numel > 0 && !t.data) throw ValueError(which + " has " + std::to_string(t.numel) + " elements but no data");
  }
}

}  // namespace

void multi_tensor_norm(const Context& ctx, DType norm_dtype, std::span<const NormTensor> tensors, double norm_type,
                       void* norm) {
  // Looked up first: a norm dtype without a kernel is an error even for an empty list.
  MultiTensorNormKernel* const kernel = multi_tensor_norm_kernels().get("multi_tensor_norm", ctx.device, norm_dtype);
  if (!(norm_type >= 1.0))
    throw ValueError("multi_tensor_norm: norm_type must be >= 1 or infinity, got " + std::to_string(norm_type));
  if (!norm) throw ValueError("multi_tensor_norm: expected a pointer to the norm's scalar, got none");
  check_tensors("multi_tensor_norm", norm_dtype, tensors);
  kernel(ctx, norm_dtype, tensors, norm_type, norm);  // an empty list still writes its norm, 0
}

void multi_tensor_clip_scale(const Context& ctx, DType norm_dtype, std::span<const NormTensor> tensors,
                             const void* norm, double max_norm) {
  MultiTensorClipScaleKernel* const kernel =
      multi_tensor_clip_scale_kernels().get("multi_tensor_clip_scale", ctx.device, norm_dtype);
  if (!(max_norm >= 0.0))
    throw ValueError("multi_tensor_clip_scale: max_norm must be >= 0, got " + std::to_string(max_norm));
  if (!norm) throw ValueError("multi_tensor_clip_scale: expected a pointer to the norm's scalar, got none");
  check_tensors("multi_tensor_clip_scale", norm_dtype, tensors);
  if (tensors.empty()) return;
  kernel(ctx, norm_dtype, tensors, norm, max_norm);
}

}  // namespace sublet::ops
