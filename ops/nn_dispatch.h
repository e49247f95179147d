#pragma once
// Shared by the NN ops (conv2d, batch_norm, pooling, loss, dropout): the dtype check and the
// CPU dispatch by element type. Each op function takes its CUDA branch first (under
// SUBLET_HAVE_CUDA), then calls dispatch_float_kernel for the CPU.
#include <string>
#include <utility>

#include "core/errors.h"
#include "ops/context.h"
#include "core/dtype.h"

namespace sublet::ops::detail {

// The NN kernels are floating point only; say which op refused which dtype.
inline void require_float_dtype(const char* op, DType dtype) {
  if (dtype != DType::Float32 && dtype != DType::Float64) {
    throw DTypeError(std::string(op) + ": expected float32 or float64, got " + dtype_name(dtype));
  }
}

// Calls cpu_kernel(T{}) with T = float or double on the CPU; on CUDA throws until the op's
// CUDA kernel exists. `op` names the op in the error.
template <typename CpuKernel>
void dispatch_float_kernel(const char* op, const Context& ctx, DType dtype, CpuKernel&& cpu_kernel) {
  require_float_dtype(op, dtype);
  if (ctx.device.is_cuda()) {
    throw DeviceError(std::string(op) + ": the CUDA kernel is not built yet");
  }
  if (dtype == DType::Float32) {
    std::forward<CpuKernel>(cpu_kernel)(float{});
  } else {
    std::forward<CpuKernel>(cpu_kernel)(double{});
  }
}

// The operands arrive type-erased; the CPU kernels take typed pointers.
template <typename T>
const T* typed(const void* p) { return static_cast<const T*>(p); }
template <typename T>
T* typed(void* p) { return static_cast<T*>(p); }

}  // namespace sublet::ops::detail
