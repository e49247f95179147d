#pragma once
// Scaled dot-product attention on [B, H, T, D] operands, as torch.nn.functional.
// scaled_dot_product_attention without a mask tensor or dropout:
//   out = softmax(scale * q k^T + mask) v,   mask[t, s] = -inf where is_causal and s > t
// (the upper-left aligned causal mask PyTorch uses when the query and key lengths differ).
// The forward also writes the log-sum-exp of each row of scale * q k^T (over the keys the row
// sees), which backward uses to rebuild the softmax without storing it.
//
// Operands are strided views with a unit stride over D (q, k, v as views of one [B, T, 3, H, D]
// projection are read in place); lse is dense [B, H, Tq]. The CUDA 16-bit kernels also need
// 16-byte aligned rows (ops::attention_rows_aligned); the runtime copies operands that are not.
#include <cstdint>

#include "core/dtype.h"
#include "ops/context.h"

namespace sublet::ops {

struct AttentionShape {
  std::int64_t batch = 0, heads = 0, query_len = 0, key_len = 0, head_dim = 0;
  bool causal = false;
  double scale = 1.0;
};

// Element strides of one [B, H, T, D] operand (D's stride is 1).
struct AttentionStrides {
  std::int64_t batch = 0, head = 0, token = 0;
};
struct ConstAttentionRef {
  const void* data = nullptr;
  AttentionStrides strides;
};
struct AttentionRef {
  void* data = nullptr;
  AttentionStrides strides;
};

// Whether query row `query` may not see key `key`: one definition for every kernel.
#if defined(__CUDACC__)
__host__ __device__
#endif
constexpr bool attention_masked(std::int64_t query, std::int64_t key, bool causal) {
  return causal && key > query;
}

// Dtype of the saved log-sum-exp: float64 for float64 operands, float32 otherwise.
constexpr DType attention_lse_dtype(DType dtype) { return dtype == DType::Float64 ? DType::Float64 : DType::Float32; }

// Whether every row of the operand starts 16-byte aligned (base and strides), as the CUDA
// 16-bit kernels' vector loads need.
bool attention_rows_aligned(const void* data, const AttentionStrides& strides, DType dtype);

// out [B, H, Tq, D]; lse [B, H, Tq] of attention_lse_dtype.
void attention_forward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                       ConstAttentionRef key, ConstAttentionRef value, AttentionRef out, void* lse);

// Gradients of the three inputs from the forward's out and lse and the output's gradient.
void attention_backward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                        ConstAttentionRef key, ConstAttentionRef value, ConstAttentionRef out,
                        ConstAttentionRef grad_out, const void* lse, AttentionRef grad_query, AttentionRef grad_key,
                        AttentionRef grad_value);

}  // namespace sublet::ops
