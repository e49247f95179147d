#include "ops/cuda/random_cuda.h"

#include <vector>

#include "ops/cpu/random_cpu.h"
#include "ops/cuda/copy_cuda.h"

namespace sublet::ops::cuda {
namespace {

// Draws into a host buffer with `draw`, then uploads; copy_bytes returns once the bytes have
// arrived, so the host buffer may go out of scope right after.
template <typename Draw>
void fill_from_host(const Context& ctx, DType dtype, void* dst, std::int64_t count, Draw&& draw) {
  const std::size_t bytes = static_cast<std::size_t>(count) * element_size(dtype);
  std::vector<unsigned char> host(bytes);
  draw(host.data());
  copy_bytes(ctx.device, dst, Device::cpu(), host.data(), bytes, ctx.stream);
}

}  // namespace

void fill_uniform(const Context& ctx, DType dtype, void* dst, std::int64_t count, double low, double high,
                  std::mt19937_64& engine) {
  fill_from_host(ctx, dtype, dst, count,
                 [&](void* host) { cpu::fill_uniform(dtype, host, count, low, high, engine); });
}

void fill_normal(const Context& ctx, DType dtype, void* dst, std::int64_t count, double mean, double stddev,
                 std::mt19937_64& engine) {
  fill_from_host(ctx, dtype, dst, count,
                 [&](void* host) { cpu::fill_normal(dtype, host, count, mean, stddev, engine); });
}

}  // namespace sublet::ops::cuda
