#pragma once
// CUDA kernels behind ops/reduce.h (same arguments, device pointers).
#include "ops/reduce.h"

namespace sublet::ops::cuda {

void reduce_sum(const Context& ctx, DType dtype, const ReduceGeometry& geometry, void* out, const void* in,
                double scale);
void reduce_extremum(const Context& ctx, ExtremumKind kind, DType dtype, const ReduceGeometry& geometry,
                     void* values, std::int64_t* indices, const void* in);
void scatter_add(const Context& ctx, DType dtype, const ScatterGeometry& geometry, void* out,
                 const std::int64_t* indices, const void* src);
void gather(const Context& ctx, DType dtype, const ScatterGeometry& geometry, void* out,
            const std::int64_t* indices, const void* in);

}  // namespace sublet::ops::cuda
