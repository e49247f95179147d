#pragma once
#include "ops/copy.h"

namespace sublet::ops::cpu {
// Templates on the destination's element type with the kernel signatures of ops/copy_kernels.h,
// registered per dtype by ops/cpu/register_cpu_kernels.cpp; instantiated for float, double,
// int64, BFloat16, Float16 (core/half.h) and uint8 (storage types on the CPU: casts and fills only).
// copy<D> reads any of those six source dtypes (a cast).
template <typename D>
void copy(const Context& ctx, const Shape& sizes, DType dst_dtype, StridedRef dst, DType src_dtype,
          ConstStridedRef src);
template <typename T>
void fill(const Context& ctx, DType dtype, const Shape& sizes, StridedRef dst, double value);
}
