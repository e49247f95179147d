#include "ops/cuda/attention_cuda.h"

#include <initializer_list>
#include <string>

#include "core/errors.h"

namespace sublet::ops::cuda {

namespace {

bool is_16_bit(DType dtype) { return dtype == DType::BFloat16 || dtype == DType::Float16; }

void check_flash(const AttentionShape& shape, DType dtype, std::initializer_list<const void*> rows,
                 std::initializer_list<AttentionStrides> strides) {
  if (!detail::flash_attention_supports(shape.head_dim)) {
    throw ShapeError(std::string("scaled_dot_product_attention: the fused ") + dtype_name(dtype) +
                     " CUDA kernel takes head dims 16, 32, 64 and 128, got " + std::to_string(shape.head_dim) +
                     " (run float32 for other sizes)");
  }
  auto s = strides.begin();
  for (const void* data : rows) {
    if (!attention_rows_aligned(data, *s++, dtype)) {
      throw ValueError("scaled_dot_product_attention: the fused CUDA kernel needs 16-byte aligned rows (base "
                       "pointer and batch, head and token strides); make the operand contiguous first");
    }
  }
}

}  // namespace

void attention_forward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                       ConstAttentionRef key, ConstAttentionRef value, AttentionRef out, void* lse) {
  if (is_16_bit(dtype)) {
    check_flash(shape, dtype, {query.data, key.data, value.data, out.data},
                {query.strides, key.strides, value.strides, out.strides});
    detail::flash_attention_forward(ctx, shape, dtype, query, key, value, out, static_cast<float*>(lse));
    return;
  }
  detail::unfused_attention_forward(ctx, shape, dtype, query, key, value, out, lse);
}

void attention_backward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                        ConstAttentionRef key, ConstAttentionRef value, ConstAttentionRef out,
                        ConstAttentionRef grad_out, const void* lse, AttentionRef grad_query, AttentionRef grad_key,
                        AttentionRef grad_value) {
  if (is_16_bit(dtype)) {
    check_flash(shape, dtype,
                {query.data, key.data, value.data, out.data, grad_out.data, grad_query.data, grad_key.data,
                 grad_value.data},
                {query.strides, key.strides, value.strides, out.strides, grad_out.strides, grad_query.strides,
                 grad_key.strides, grad_value.strides});
    detail::flash_attention_backward(ctx, shape, dtype, query, key, value, out, grad_out, static_cast<const float*>(lse),
                                     grad_query, grad_key, grad_value);
    return;
  }
  detail::unfused_attention_backward(ctx, shape, dtype, query, key, value, grad_out, lse, grad_query, grad_key,
                                     grad_value);
}

}  // namespace sublet::ops::cuda
