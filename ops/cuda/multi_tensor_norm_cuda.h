#pragma once
// CUDA multi-tensor kernels behind ops/multi_tensor_norm.h (see ops/cuda/multi_tensor_norm.cu).
#include <span>

#include "ops/multi_tensor_norm.h"

namespace sublet::ops::cuda {

void multi_tensor_norm(const Context& ctx, DType norm_dtype, std::span<const NormTensor> tensors, double norm_type,
                       void* norm);
void multi_tensor_clip_scale(const Context& ctx, DType norm_dtype, std::span<const NormTensor> tensors,
                             const void* norm, double max_norm);

}  // namespace sublet::ops::cuda
