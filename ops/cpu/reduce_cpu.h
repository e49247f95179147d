#pragma once
#include "ops/reduce.h"

namespace sublet::ops::cpu {

void reduce_sum(DType dtype, const ReduceGeometry& geometry, void* out, const void* in, double scale);
void reduce_extremum(ExtremumKind kind, DType dtype, const ReduceGeometry& geometry, void* values,
                     std::int64_t* indices, const void* in);
void scatter_add(DType dtype, const ScatterGeometry& geometry, void* out, const std::int64_t* indices,
                 const void* src);
void gather(DType dtype, const ScatterGeometry& geometry, void* out, const std::int64_t* indices, const void* in);

}  // namespace sublet::ops::cpu
