#include "ops/random.h"

#include "ops/random_kernels.h"

namespace sublet::ops {

// The CUDA kernels draw on the host with the CPU kernel and upload, which keeps values
// identical across devices (ops/cuda/random_cuda.h).
void fill_uniform(const Context& ctx, DType dtype, void* dst, std::int64_t count, double low, double high,
                  std::mt19937_64& engine) {
  fill_uniform_kernels().get("uniform", ctx.device, dtype)(ctx, dtype, dst, count, low, high, engine);
}

void fill_normal(const Context& ctx, DType dtype, void* dst, std::int64_t count, double mean, double stddev,
                 std::mt19937_64& engine) {
  fill_normal_kernels().get("normal", ctx.device, dtype)(ctx, dtype, dst, count, mean, stddev, engine);
}

}  // namespace sublet::ops
