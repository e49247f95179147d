#include "ops/reduce.h"

#include "ops/reduce_kernels.h"

namespace sublet::ops {

void reduce_sum(const Context& ctx, DType dtype, const ReduceGeometry& geometry, void* out, const void* in,
                double scale) {
  reduce_sum_kernels().get("sum", ctx.device, dtype)(ctx, dtype, geometry, out, in, scale);
}

void reduce_extremum(const Context& ctx, ExtremumKind kind, DType dtype, const ReduceGeometry& geometry,
                     void* values, std::int64_t* indices, const void* in) {
  reduce_extremum_kernels().get(kind == ExtremumKind::Max ? "max" : "min", ctx.device, dtype)(
      ctx, kind, dtype, geometry, values, indices, in);
}

void scatter_add(const Context& ctx, DType dtype, const ScatterGeometry& geometry, void* out,
                 const std::int64_t* indices, const void* src) {
  scatter_add_kernels().get("scatter_add", ctx.device, dtype)(ctx, dtype, geometry, out, indices, src);
}

void gather(const Context& ctx, DType dtype, const ScatterGeometry& geometry, void* out,
            const std::int64_t* indices, const void* in) {
  gather_kernels().get("gather", ctx.device, dtype)(ctx, dtype, geometry, out, indices, in);
}

}  // namespace sublet::ops
