#pragma once
// CPU kernels behind ops/optim_update.h (the dispatcher has checked the arguments).
#include <span>

#include "ops/optim_update.h"

namespace sublet::ops::cpu {

// Templates on the element type with the op's kernel signature (ops/optim_update_kernels.h), so that
// ops/cpu/register_cpu_kernels.cpp registers one instantiation per dtype; ctx and dtype are unused here.
// Instantiated for float and double. The "device" scalars and the found-inf flag are host memory here.
template <typename T>
void sgd_update(const Context& ctx, DType dtype, std::span<const SgdTensor> tensors, const SgdHyper& hyper,
                const UpdateScalars& scalars);
template <typename T>
void adam_update(const Context& ctx, DType dtype, std::span<const AdamTensor> tensors, const AdamHyper& hyper,
                 const UpdateScalars& scalars);
template <typename T>
void mark_non_finite(const Context& ctx, DType dtype, std::span<const FiniteCheckTensor> tensors, float* found_inf);

}  // namespace sublet::ops::cpu
