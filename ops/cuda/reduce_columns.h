#pragma once
// Sums over the rows of a [rows, cols] layout whose columns are dense (ops/cuda/reduce_plan.h
// says when a reduction is one): out[c] = scale * sum over r of in[r * row_stride + c].
#include "core/dtype.h"
#include "ops/context.h"
#include "ops/cuda/reduce_plan.h"

namespace sublet::ops::cuda {

void sum_columns(const Context& ctx, DType dtype, const ColumnPlan& plan, void* out, const void* in, double scale);

}  // namespace sublet::ops::cuda
