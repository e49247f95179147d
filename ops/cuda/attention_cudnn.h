#pragma once
// Scaled dot-product attention on cuDNN's fused flash-attention engines, for bfloat16 and
// float16 (the graphs: ops/cuda/attention_cudnn_graph.h). A plan is built once per (thread,
// device, pass, dtype, sizes, causal, operand strides) - building one takes milliseconds - and
// cached, the answer "no engine" included. Each run takes one workspace from ctx.workspace()
// (the plan's, and for backward the float32 dQ accumulator it zeroes with a stream-ordered
// memset) and nothing else: once the plan exists, the calls can be captured into a CUDA graph.
#include "ops/attention.h"

namespace sublet::ops::cuda::detail {

// Why cuDNN's fused attention cannot take the call (head dim, dtype, device), or nullptr when
// it may: whether an engine runs the shape is known only once a plan is built.
const char* cudnn_attention_refusal(const Context& ctx, const AttentionShape& shape, DType dtype);

// Enqueue the pass on ctx.stream and return true; return false, having enqueued nothing, when
// cuDNN has no engine for it. Throws CudaError for a cuDNN failure and OutOfMemoryError when
// the workspace cannot be had. The operands' rows must be 16-byte aligned
// (ops::attention_rows_aligned). lse is [B, H, Tq] float32, cuDNN's softmax statistics.
bool cudnn_attention_forward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                             ConstAttentionRef key, ConstAttentionRef value, AttentionRef out, float* lse);
bool cudnn_attention_backward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                              ConstAttentionRef key, ConstAttentionRef value, ConstAttentionRef out,
                              ConstAttentionRef grad_out, const float* lse, AttentionRef grad_query,
                              AttentionRef grad_key, AttentionRef grad_value);

}  // namespace sublet::ops::cuda::detail
