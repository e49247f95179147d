#include "ops/attention.h"

#include <cstdint>
#include <string>

#include "core/errors.h"
#include "ops/attention_kernels.h"

namespace sublet::ops {

namespace {

void check_shape(const AttentionShape& s) {
  if (s.batch < 0 || s.heads < 0 || s.query_len < 0 || s.key_len < 0 || s.head_dim <= 0) {
    throw ShapeError("scaled_dot_product_attention: sizes must be >= 0 and head_dim > 0, got batch " +
                     std::to_string(s.batch) + ", heads " + std::to_string(s.heads) + ", query_len " +
                     std::to_string(s.query_len) + ", key_len " + std::to_string(s.key_len) + ", head_dim " +
                     std::to_string(s.head_dim));
  }
  if (s.key_len == 0 && s.query_len > 0) {
    throw ShapeError("scaled_dot_product_attention: the key length must be > 0 (a query must see some key), got 0");
  }
  if (!(s.scale == s.scale) || s.scale == 0 || s.scale > 1e300 || s.scale < -1e300) {
    throw ValueError("scaled_dot_product_attention: scale must be finite and non-zero, got " + std::to_string(s.scale));
  }
}

bool empty(const AttentionShape& s) { return s.batch == 0 || s.heads == 0 || s.query_len == 0; }

}  // namespace

bool attention_rows_aligned(const void* data, const AttentionStrides& strides, DType dtype) {
  const auto bytes = static_cast<std::int64_t>(element_size(dtype));
  const auto aligned = [](std::int64_t v) { return v % 16 == 0; };
  return reinterpret_cast<std::uintptr_t>(data) % 16 == 0 && aligned(strides.batch * bytes) &&
         aligned(strides.head * bytes) && aligned(strides.token * bytes);
}

void attention_forward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                       ConstAttentionRef key, ConstAttentionRef value, AttentionRef out, void* lse) {
  check_shape(shape);
  if (empty(shape)) return;
  attention_forward_kernels().get("scaled_dot_product_attention", ctx.device, dtype)(ctx, shape, dtype, query, key,
                                                                                     value, out, lse);
}

void attention_backward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                        ConstAttentionRef key, ConstAttentionRef value, ConstAttentionRef out,
                        ConstAttentionRef grad_out, const void* lse, AttentionRef grad_query, AttentionRef grad_key,
                        AttentionRef grad_value) {
  check_shape(shape);
  if (empty(shape)) return;  // no query row: nothing reaches the inputs (the caller zero-fills)
  attention_backward_kernels().get("scaled_dot_product_attention backward", ctx.device, dtype)(
      ctx, shape, dtype, query, key, value, out, grad_out, lse, grad_query, grad_key, grad_value);
}

}  // namespace sublet::ops
