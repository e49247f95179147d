#pragma once
// CUDA scaled dot-product attention behind ops/attention.h:
//  - float32 and float64: cuBLAS strided-batched GEMMs for q k^T, p v and the backward's four
//    products, with the [H, Tq, Tk] scores of one batch element materialised in a workspace and
//    a masked softmax kernel between them (ops/cuda/attention_unfused.cu);
//  - bfloat16 and float16: cuDNN's fused flash attention (ops/cuda/attention_cudnn.h; head dims
//    that are multiples of 8 up to 128) where it has an engine for the shape, else sublet's fused
//    flash-style kernels (FlashAttention-2's algorithm, float32 accumulation, tensor-core
//    mma.sync on sm_80 and later; ops/cuda/attention_flash_*.cu; head dims 16, 32, 64 and 128).
//    Neither holds the scores in memory. tuning().attention_backend picks (core/tuning.h).
#include "ops/attention.h"

namespace sublet::ops::cuda {

void attention_forward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                       ConstAttentionRef key, ConstAttentionRef value, AttentionRef out, void* lse);
void attention_backward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                        ConstAttentionRef key, ConstAttentionRef value, ConstAttentionRef out,
                        ConstAttentionRef grad_out, const void* lse, AttentionRef grad_query, AttentionRef grad_key,
                        AttentionRef grad_value);

// The two implementations (internal to ops/cuda).
namespace detail {
void unfused_attention_forward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                               ConstAttentionRef key, ConstAttentionRef value, AttentionRef out, void* lse);
void unfused_attention_backward(const Context& ctx, const AttentionShape& shape, DType dtype,
                                ConstAttentionRef query, ConstAttentionRef key, ConstAttentionRef value,
                                ConstAttentionRef grad_out, const void* lse, AttentionRef grad_query,
                                AttentionRef grad_key, AttentionRef grad_value);
void flash_attention_forward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                             ConstAttentionRef key, ConstAttentionRef value, AttentionRef out, float* lse);
void flash_attention_backward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                              ConstAttentionRef key, ConstAttentionRef value, ConstAttentionRef out,
                              ConstAttentionRef grad_out, const float* lse, AttentionRef grad_query,
                              AttentionRef grad_key, AttentionRef grad_value);
// Head dims the fused kernels are built for.
bool flash_attention_supports(std::int64_t head_dim);
}  // namespace detail

}  // namespace sublet::ops::cuda
