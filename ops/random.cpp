#include "ops/random.h"

#include "memory/errors.h"
#include "ops/cpu/random_cpu.h"

namespace sublet::ops {

// Dispatch points. A CUDA version can generate on the host and copy_bytes the result, which
// keeps values identical across devices.
void fill_uniform(const Context& ctx, DType dtype, void* dst, std::int64_t count, double low, double high,
                  std::mt19937_64& engine) {
  if (ctx.device.is_cpu()) return cpu::fill_uniform(dtype, dst, count, low, high, engine);
  throw DeviceError("uniform: no kernel for " + ctx.device.str() + " yet");
}

void fill_normal(const Context& ctx, DType dtype, void* dst, std::int64_t count, double mean, double stddev,
                 std::mt19937_64& engine) {
  if (ctx.device.is_cpu()) return cpu::fill_normal(dtype, dst, count, mean, stddev, engine);
  throw DeviceError("normal: no kernel for " + ctx.device.str() + " yet");
}

}  // namespace sublet::ops
