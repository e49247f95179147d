#pragma once
// The CPU reference of scaled dot-product attention (ops/attention.h): plain loops over each
// (batch, head), sums in double, one OpenMP task per (batch, head).
#include "ops/attention.h"

namespace sublet::ops::cpu {

template <typename T>
void attention_forward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                       ConstAttentionRef key, ConstAttentionRef value, AttentionRef out, void* lse);

template <typename T>
void attention_backward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                        ConstAttentionRef key, ConstAttentionRef value, ConstAttentionRef out,
                        ConstAttentionRef grad_out, const void* lse, AttentionRef grad_query, AttentionRef grad_key,
                        AttentionRef grad_value);

}  // namespace sublet::ops::cpu
