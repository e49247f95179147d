// The mask function is ops/dropout.h's constexpr dropout_keeps, called from device code
// (--expt-relaxed-constexpr): one definition for both devices, so the masks cannot drift apart.
// The scale is computed on the host exactly as the CPU kernel does, so kept values agree bit
// for bit. bfloat16 and float16 multiply in float32 by the float32 scale and round once to 16
// bits (ops/cuda/half_types.cuh), as the float32 CPU kernel followed by the host rounding.
#include <string>

#include "core/errors.h"
#include "ops/cuda/cuda_checks.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/dropout_cuda.h"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/launch.cuh"

namespace sublet::ops::cuda {
namespace {

template <typename T>
__global__ void dropout_kernel(std::int64_t numel, const T* input, double p, std::uint64_t seed,
                               std::uint64_t offset, ComputeType<T> scale, T* output) {
  using C = ComputeType<T>;
  for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) {
    const bool keep = dropout_keeps(seed, offset + static_cast<std::uint64_t>(i), p);
    output[i] = store_compute<T>(keep ? load_compute(input[i]) * scale : C(0));
  }
}

template <typename T>
void apply(const Context& ctx, std::int64_t numel, const T* input, double p, std::uint64_t seed,
           std::uint64_t offset, T* output) {
  if (numel == 0) return;
  // p = 1 keeps nothing; the scale is then never used (and would be infinite).
  using C = ComputeType<T>;
  const C scale = p < 1 ? static_cast<C>(1.0 / (1.0 - p)) : C(0);
  memory::CudaDeviceGuard device(ctx.device);
  dropout_kernel<T><<<grid_for(numel), kBlockThreads, 0, stream_of(ctx.stream)>>>(numel, input, p, seed, offset,
                                                                                   scale, output);
  SUBLET_CUDA_LAUNCH_CHECK(dropout_kernel);
}

}  // namespace

void dropout_apply(const Context& ctx, std::int64_t numel, DType dtype, const void* input, double p,
                   std::uint64_t seed, std::uint64_t offset, void* output) {
  if (dtype == DType::Float32) {
    apply<float>(ctx, numel, static_cast<const float*>(input), p, seed, offset, static_cast<float*>(output));
  } else if (dtype == DType::Float64) {
    apply<double>(ctx, numel, static_cast<const double*>(input), p, seed, offset, static_cast<double*>(output));
  } else if (dtype == DType::BFloat16) {
    apply<__nv_bfloat16>(ctx, numel, static_cast<const __nv_bfloat16*>(input), p, seed, offset,
                         static_cast<__nv_bfloat16*>(output));
  } else if (dtype == DType::Float16) {
    apply<__half>(ctx, numel, static_cast<const __half*>(input), p, seed, offset, static_cast<__half*>(output));
  } else {
    throw DTypeError(std::string("dropout: expected float32, float64, bfloat16 or float16, got ") + dtype_name(dtype));
  }
}

}  // namespace sublet::ops::cuda
