#pragma once
// Reductions. The runtime splits the input's dimensions into kept ("outer") and reduced
// ("inner") ones and passes each group's sizes and strides, so any set of dimensions of any
// view reduces without a copy. Outputs are contiguous over the outer dimensions.
// Float32 sums accumulate in double; results never depend on the number of threads.
#include "ops/context.h"
#include "core/dtype.h"
#include "ops/strided.h"

namespace sublet::ops {

struct ReduceGeometry {
  Shape outer_sizes;
  Shape outer_strides;  // input strides of the kept dimensions
  Shape inner_sizes;
  Shape inner_strides;  // input strides of the reduced dimensions
};

// out[o] = sum over the inner dimensions of in[o, ...] * scale (scale = 1/n gives the mean).
void reduce_sum(const Context& ctx, DType dtype, const ReduceGeometry& geometry, void* out, const void* in,
                double scale = 1.0);

// Along one dimension: values[o] = max (or min) over it, indices[o] = its position (int64; the
// first one on ties). NaN wins, as in PyTorch.
enum class ExtremumKind { Max, Min };
void reduce_extremum(const Context& ctx, ExtremumKind kind, DType dtype, const ReduceGeometry& geometry,
                     void* values, std::int64_t* indices, const void* in);

// out[o, indices[o, j]] += src[o, j] along one dimension of `out` (the backward of max along a
// dimension and of gather). outer_sizes/strides describe the other dimensions of `out`;
// index_count is the length of the indexed dimension in `indices` and `src`, whose strides are
// given per outer dimension plus one for that dimension.
struct ScatterGeometry {
  Shape outer_sizes;
  Shape out_outer_strides;
  std::int64_t out_dim_stride = 0;
  std::int64_t out_dim_size = 0;      // bounds check for the indices
  std::int64_t index_count = 1;
  Shape index_strides;                // outer dims then the indexed dim
  Shape src_strides;                  // outer dims then the indexed dim
};
void scatter_add(const Context& ctx, DType dtype, const ScatterGeometry& geometry, void* out,
                 const std::int64_t* indices, const void* src);

// out[o, j] = in[o, indices[o, j]]: the same geometry with `in` in the role of `out` above and
// `out` contiguous over (outer dims, index_count). Throws ValueError for an index out of range.
void gather(const Context& ctx, DType dtype, const ScatterGeometry& geometry, void* out,
            const std::int64_t* indices, const void* in);

}  // namespace sublet::ops
