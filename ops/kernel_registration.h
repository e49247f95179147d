#pragma once
// The backends' registration functions, called once by ensure_kernels_registered()
// (ops/kernel_registration.cpp, the one ops/ file that knows which backends are built in).
// Each fills the kernel tables (ops/*_kernels.h) and device services of its device type.
namespace sublet::ops {

void register_cpu_kernels();   // ops/cpu/register_cpu_kernels.cpp
void register_cuda_kernels();  // ops/cuda/register_cuda_kernels.cpp, CUDA builds only

}  // namespace sublet::ops
