#pragma once
// Host side of the fused attention kernels: their parameter block, grid and the per-launch
// checks (an sm_80+ device with enough shared memory per block for the head dim).
#include <cuda_runtime_api.h>

#include "ops/attention.h"

namespace sublet::ops::cuda::detail {

struct FlashParams {
  ConstAttentionRef q, k, v;
  AttentionRef out;                   // forward's output
  ConstAttentionRef o, grad_out;      // backward's inputs besides q, k, v
  AttentionRef grad_q, grad_k, grad_v;
  std::int64_t batch = 0, heads = 0, query_len = 0, key_len = 0, head_dim = 0;
  bool causal = false;
  float scale = 1.f;
};

FlashParams flash_params(const AttentionShape& shape, ConstAttentionRef q, ConstAttentionRef k, ConstAttentionRef v,
                         AttentionRef out);

// One block per (batch * head, 64 rows of `rows`).
dim3 flash_grid(const FlashParams& params, std::int64_t rows);

// Refuses devices before sm_80 and head dims whose tiles exceed the device's shared memory per
// block, and lets `kernel` use `shared_bytes` of dynamic shared memory. ctx.device is current.
void prepare_flash_launch(const Context& ctx, const void* kernel, std::size_t shared_bytes);

}  // namespace sublet::ops::cuda::detail
