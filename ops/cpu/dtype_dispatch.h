#pragma once
// Calls f(T{}) with T the C++ type of `dtype`, so a kernel template is written once for all
// element types.
#include <cstdint>
#include <string>

#include "core/errors.h"
#include "core/dtype.h"

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

template <typename F>
void dispatch_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Float32: f(float{}); return;
    case DType::Float64: f(double{}); return;
    default: throw DTypeError(std::string(op) + ": expected float32 or float64, got " + dtype_name(dtype));
  }
}

}  // namespace sublet::ops::cpu
