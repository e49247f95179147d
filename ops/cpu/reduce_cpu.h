#pragma once
#include "ops/reduce.h"

namespace sublet::ops::cpu {

// Templates on the element type with the op's kernel signature (ops/reduce_kernels.h), so that
// ops/cpu/register_cpu_kernels.cpp registers one instantiation per dtype; ctx and dtype are unused here.
// Instantiated for float, double and int64.
template <typename T>
void reduce_sum(const Context& ctx, DType dtype, const ReduceGeometry& geometry, void* out, const void* in,
                double scale);
template <typename T>
void reduce_extremum(const Context& ctx, ExtremumKind kind, DType dtype, const ReduceGeometry& geometry,
                     void* values, std::int64_t* indices, const void* in);
template <typename T>
void scatter_add(const Context& ctx, DType dtype, const ScatterGeometry& geometry, void* out,
                 const std::int64_t* indices, const void* src);
template <typename T>
void gather(const Context& ctx, DType dtype, const ScatterGeometry& geometry, void* out,
            const std::int64_t* indices, const void* in);

}  // namespace sublet::ops::cpu
