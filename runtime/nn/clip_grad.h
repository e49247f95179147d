#pragma once
// Gradient clipping by one global norm, as torch.nn.utils.clip_grad_norm_: the norm of all the
// parameters' gradients taken together (the norm of the per-parameter norms); when it exceeds
// max_norm every gradient is scaled by max_norm / (norm + 1e-6). Parameters without a gradient
// are skipped. norm_type is p >= 1, or infinity for the largest absolute value. A NaN or
// infinite norm scales the gradients to NaN as PyTorch does (error_if_nonfinite off).
//
//   double norm = nn::utils::clip_grad_norm_(model.parameters(), 1.0);
//
// clip_grad_norm_ returns the norm as a double, which waits for the device (one sync), as
// LibTorch's. clip_grad_norm_tensor_ does the same clipping but returns the norm as a 0-dim
// tensor (float32; float64 when a gradient is float64) on the gradients' device and never
// waits: the scale is computed and applied on the device, so a CUDA graph can capture it.
// Gradients must share one device (ValueError otherwise).
//
// Dense float32/float64/bfloat16/float16 gradients are clipped by the multi-tensor kernels of
// ops/multi_tensor_norm.h, a few launches for all of them (as PyTorch's foreach path); others
// (strided views) take per-gradient Tensor ops. The norm accumulates in float64 on the CPU and
// in float32 chunks added in float64 on CUDA, the same bits on every run; the scale is
// (1 / (norm + 1e-6)) * max_norm clamped to 1, rounded to each gradient's dtype.
#include <limits>
#include <vector>

#include "runtime/tensor.h"

namespace sublet::nn::utils {

double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0);
Tensor clip_grad_norm_tensor_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0);

}  // namespace sublet::nn::utils
