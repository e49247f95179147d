#include "ops/cuda/attention_flash_launch.h"

#include <climits>
#include <string>

#include "core/errors.h"
#include "ops/cuda/cuda_checks.h"

namespace sublet::ops::cuda::detail {

namespace {
constexpr std::int64_t kRowsPerBlock = 64;  // flash::kBlockM and kBlockN
}

FlashParams flash_params(const AttentionShape& shape, ConstAttentionRef q, ConstAttentionRef k, ConstAttentionRef v,
                         AttentionRef out) {
  FlashParams p;
  p.q = q;
  p.k = k;
  p.v = v;
  p.out = out;
  p.batch = shape.batch;
  p.heads = shape.heads;
  p.query_len = shape.query_len;
  p.key_len = shape.key_len;
  p.head_dim = shape.head_dim;
  p.causal = shape.causal;
  p.scale = static_cast<float>(shape.scale);
  return p;
}

dim3 flash_grid(const FlashParams& params, std::int64_t rows) {
  const std::int64_t heads = params.batch * params.heads;
  const std::int64_t tiles = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  if (heads > INT_MAX || tiles > 65535) {
    throw ShapeError("scaled_dot_product_attention: batch * heads " + std::to_string(heads) + " or length " +
                     std::to_string(rows) + " exceeds the fused kernel's grid (2^31 - 1 heads, 65535 * 64 rows)");
  }
  return dim3(static_cast<unsigned>(heads), static_cast<unsigned>(tiles));
}

void prepare_flash_launch(const Context& ctx, const void* kernel, std::size_t shared_bytes) {
  int major = 0, shared_optin = 0;
  SUBLET_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx.device.index));
  if (major < 8) {
    throw DeviceError("scaled_dot_product_attention: the fused bfloat16/float16 kernel needs an sm_80 or newer GPU "
                      "(tensor-core bf16 mma), got compute capability " + std::to_string(major) +
                      ".x; run float32 on this device");
  }
  SUBLET_CUDA_CHECK(cudaDeviceGetAttribute(&shared_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx.device.index));
  if (static_cast<std::size_t>(shared_optin) < shared_bytes) {
    throw DeviceError("scaled_dot_product_attention: the fused kernel for this head dim needs " +
                      std::to_string(shared_bytes) + " bytes of shared memory per block, the device offers " +
                      std::to_string(shared_optin) + "; use a smaller head dim or float32");
  }
  SUBLET_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)));
}

}  // namespace sublet::ops::cuda::detail
