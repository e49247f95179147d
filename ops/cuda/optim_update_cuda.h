#pragma once
// CUDA multi-tensor kernels behind ops/optim_update.h (device pointers; see ops/cuda/optim_update.cu).
#include <span>

#include "ops/optim_update.h"

namespace sublet::ops::cuda {

void sgd_update(const Context& ctx, DType dtype, std::span<const SgdTensor> tensors, const SgdHyper& hyper,
                const UpdateScalars& scalars);
void adam_update(const Context& ctx, DType dtype, std::span<const AdamTensor> tensors, const AdamHyper& hyper,
                 const UpdateScalars& scalars);
void mark_non_finite(const Context& ctx, DType dtype, std::span<const FiniteCheckTensor> tensors, float* found_inf);
void write_update_scalars(const Context& ctx, double* device_values, const double* host_values, std::int64_t count);

}  // namespace sublet::ops::cuda
