#pragma once
// CPU kernels behind ops/multi_tensor_norm.h (the front has checked the arguments). Templates on
// the norm's type (float or double) with the table signature; the norm is host memory here.
#include <span>

#include "ops/multi_tensor_norm.h"

namespace sublet::ops::cpu {

template <typename N>
void multi_tensor_norm(const Context& ctx, DType norm_dtype, std::span<const NormTensor> tensors, double norm_type,
                       void* norm);
template <typename N>
void multi_tensor_clip_scale(const Context& ctx, DType norm_dtype, std::span<const NormTensor> tensors,
                             const void* norm, double max_norm);

}  // namespace sublet::ops::cpu
