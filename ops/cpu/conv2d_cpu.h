#pragma once
// CPU conv2d: im2col / col2im + Eigen GEMM per image, images spread over the OpenMP threads;
// float32 takes the direct tile kernels where they apply (conv2d_avx2_cpu.h), and on a CPU with
// AVX-512 the GEMMs run Eigen's AVX-512 kernels (gemm_avx512_cpu.h; TuningOptions::cpu_avx512 =
// false, core/tuning.h, turns every AVX-512 path off).
// Called through ops/conv2d.h, which validates the shape and picks T (float or double).
#include "ops/context.h"
#include "ops/conv2d.h"

namespace sublet::ops::cpu {

template <typename T>
void conv2d_forward(const Context& ctx, const Conv2dShape& shape, const T* input, const T* weight,
                    const T* bias, T* output);
template <typename T>
void conv2d_backward_input(const Context& ctx, const Conv2dShape& shape, const T* grad_output,
                           const T* weight, T* grad_input);
template <typename T>
void conv2d_backward_weight(const Context& ctx, const Conv2dShape& shape, const T* grad_output,
                            const T* input, T* grad_weight, T* grad_bias);

}  // namespace sublet::ops::cpu
