#include "ops/reduce.h"

#include "core/errors.h"
#include "ops/cpu/reduce_cpu.h"
#ifdef SUBLET_HAVE_CUDA
#include "ops/cuda/reduce_cuda.h"
#endif

namespace sublet::ops {
namespace {
[[noreturn]] void no_kernel(const char* op, Device device) {
  throw DeviceError(std::string(op) + ": no kernel for " + device.str() + " yet");
}
}  // namespace

// Dispatch points: CUDA kernels go beside the CPU ones (ops/cuda/) and are selected here.
void reduce_sum(const Context& ctx, DType dtype, const ReduceGeometry& geometry, void* out, const void* in,
                double scale) {
  if (ctx.device.is_cpu()) return cpu::reduce_sum(dtype, geometry, out, in, scale);
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) return cuda::reduce_sum(ctx, dtype, geometry, out, in, scale);
#endif
  no_kernel("sum", ctx.device);
}

void reduce_extremum(const Context& ctx, ExtremumKind kind, DType dtype, const ReduceGeometry& geometry,
                     void* values, std::int64_t* indices, const void* in) {
  if (ctx.device.is_cpu()) return cpu::reduce_extremum(kind, dtype, geometry, values, indices, in);
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) {
    return cuda::reduce_extremum(ctx, kind, dtype, geometry, values, indices, in);
  }
#endif
  no_kernel(kind == ExtremumKind::Max ? "max" : "min", ctx.device);
}

void scatter_add(const Context& ctx, DType dtype, const ScatterGeometry& geometry, void* out,
                 const std::int64_t* indices, const void* src) {
  if (ctx.device.is_cpu()) return cpu::scatter_add(dtype, geometry, out, indices, src);
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) return cuda::scatter_add(ctx, dtype, geometry, out, indices, src);
#endif
  no_kernel("scatter_add", ctx.device);
}

void gather(const Context& ctx, DType dtype, const ScatterGeometry& geometry, void* out,
            const std::int64_t* indices, const void* in) {
  if (ctx.device.is_cpu()) return cpu::gather(dtype, geometry, out, indices, in);
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) return cuda::gather(ctx, dtype, geometry, out, indices, in);
#endif
  no_kernel("gather", ctx.device);
}

}  // namespace sublet::ops
