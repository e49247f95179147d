#include "ops/random.h"

#include "core/errors.h"
#include "ops/cpu/random_cpu.h"
#ifdef SUBLET_HAVE_CUDA
#include "ops/cuda/random_cuda.h"
#endif

namespace sublet::ops {

// Dispatch points. A CUDA version can generate on the host and copy_bytes the result, which
// keeps values identical across devices.
void fill_uniform(const Context& ctx, DType dtype, void* dst, std::int64_t count, double low, double high,
                  std::mt19937_64& engine) {
  if (ctx.device.is_cpu()) return cpu::fill_uniform(dtype, dst, count, low, high, engine);
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) return cuda::fill_uniform(ctx, dtype, dst, count, low, high, engine);
#endif
  throw DeviceError("uniform: no kernel for " + ctx.device.str() + " yet");
}

void fill_normal(const Context& ctx, DType dtype, void* dst, std::int64_t count, double mean, double stddev,
                 std::mt19937_64& engine) {
  if (ctx.device.is_cpu()) return cpu::fill_normal(dtype, dst, count, mean, stddev, engine);
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) return cuda::fill_normal(ctx, dtype, dst, count, mean, stddev, engine);
#endif
  throw DeviceError("normal: no kernel for " + ctx.device.str() + " yet");
}

}  // namespace sublet::ops
