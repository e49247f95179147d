#pragma once
// Calls f(T{}) with T the C++ type of `dtype`, so a kernel template is written once for all
// element types. Kernel-side only: the op front files find their kernel by dtype in the kernel
// tables (ops/kernel_table.h). What still switches here is a kernel that receives a dtype of its
// own: the source of a casting copy (ops/cpu/copy_cpu.cpp, ops/cuda/copy.cu), the host random
// generator shared with CUDA (ops/cpu/random_cpu.cpp), and the CUDA kernels registered once per
// dtype they serve (ops/cuda/register_cuda_kernels.cpp).
#include <cstdint>
#include <string>
#include <utility>

#include "core/errors.h"
#include "core/dtype.h"
#include "core/half.h"

namespace sublet::ops::cpu {

template <typename F>
void dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: f(float{}); return;
    case DType::Float64: f(double{}); return;
    case DType::Int64: f(std::int64_t{}); return;
    default: break;
  }
  throw DTypeError(std::string("CPU kernels: no kernel for dtype ") + dtype_name(dtype));
}

// The source of a casting copy: every dtype, the 16-bit storage types included.
template <typename F>
void dispatch_copy_source(DType dtype, F&& f) {
  switch (dtype) {
    case DType::BFloat16: f(BFloat16{}); return;
    case DType::Float16: f(Float16{}); return;
    case DType::UInt8: f(std::uint8_t{}); return;
    default: dispatch_dtype(dtype, std::forward<F>(f));
  }
}

template <typename F>
void dispatch_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Float32: f(float{}); return;
    case DType::Float64: f(double{}); return;
    default: throw DTypeError(std::string(op) + ": expected float32 or float64, got " + dtype_name(dtype));
  }
}

}  // namespace sublet::ops::cpu
