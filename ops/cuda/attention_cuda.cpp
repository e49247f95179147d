#include "ops/cuda/attention_cuda.h"

#include <initializer_list>
#include <string>

#include "core/errors.h"
#include "core/switch_table.h"
#include "core/tuning.h"
#include "ops/cuda/attention_cudnn.h"

namespace sublet::ops::cuda {

namespace {

bool is_16_bit(DType dtype) { return dtype == DType::BFloat16 || dtype == DType::Float16; }

// Both fused paths load rows as 16-byte vectors.
void check_rows_aligned(std::initializer_list<const void*> rows, std::initializer_list<AttentionStrides> strides,
                        DType dtype) {
  auto s = strides.begin();
  for (const void* data : rows) {
    if (!attention_rows_aligned(data, *s++, dtype)) {
      throw ValueError("scaled_dot_product_attention: the fused CUDA kernel needs 16-byte aligned rows (base "
                       "pointer and batch, head and token strides); make the operand contiguous first");
    }
  }
}

void check_flash_head_dim(const AttentionShape& shape, DType dtype) {
  if (!detail::flash_attention_supports(shape.head_dim)) {
    throw ShapeError(std::string("scaled_dot_product_attention: the fused ") + dtype_name(dtype) +
                     " CUDA kernel takes head dims 16, 32, 64 and 128 (cuDNN's: multiples of 8 up to 128), got " +
                     std::to_string(shape.head_dim) + " (run float32 for other sizes)");
  }
}

// Runs the pass on cuDNN (`run` returns whether it had an engine) as the backend choice asks:
// true when cuDNN ran it, false when sublet's kernels should.
template <typename Run>
bool ran_on_cudnn(const Context& ctx, const AttentionShape& shape, DType dtype, const char* pass, Run run) {
  const AttentionBackend backend = tuning().attention_backend;
  if (backend == AttentionBackend::Sublet) return false;
  const char* refusal = detail::cudnn_attention_refusal(ctx, shape, dtype);
  if (refusal == nullptr) {
    if (run()) return true;
    refusal = "cuDNN has no engine for this shape";
  }
  if (backend == AttentionBackend::Cudnn) {
    throw ShapeError(std::string("scaled_dot_product_attention") + pass + ": " + std::string(kAttentionBackendSwitch) +
                     "=cudnn, but " + refusal + " (" + dtype_name(dtype) + ", batch " + std::to_string(shape.batch) + ", heads " +
                     std::to_string(shape.heads) + ", query length " + std::to_string(shape.query_len) +
                     ", key length " + std::to_string(shape.key_len) + ", head dim " +
                     std::to_string(shape.head_dim) + (shape.causal ? ", causal" : "") + ")");
  }
  return false;
}

}  // namespace

void attention_forward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                       ConstAttentionRef key, ConstAttentionRef value, AttentionRef out, void* lse) {
  if (is_16_bit(dtype)) {
    // Alignment is checked once a path is chosen, so a head dim no path takes is named first.
    const auto check_aligned = [&] {
      check_rows_aligned({query.data, key.data, value.data, out.data},
                         {query.strides, key.strides, value.strides, out.strides}, dtype);
    };
    const bool on_cudnn = ran_on_cudnn(ctx, shape, dtype, "", [&] {
      check_aligned();
      return detail::cudnn_attention_forward(ctx, shape, dtype, query, key, value, out, static_cast<float*>(lse));
    });
    if (on_cudnn) return;
    check_flash_head_dim(shape, dtype);
    check_aligned();
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
    const auto check_aligned = [&] {
      check_rows_aligned({query.data, key.data, value.data, out.data, grad_out.data, grad_query.data, grad_key.data,
                          grad_value.data},
                         {query.strides, key.strides, value.strides, out.strides, grad_out.strides, grad_query.strides,
                          grad_key.strides, grad_value.strides},
                         dtype);
    };
    const bool on_cudnn = ran_on_cudnn(ctx, shape, dtype, " backward", [&] {
      check_aligned();
      return detail::cudnn_attention_backward(ctx, shape, dtype, query, key, value, out, grad_out,
                                              static_cast<const float*>(lse), grad_query, grad_key, grad_value);
    });
    if (on_cudnn) return;
    check_flash_head_dim(shape, dtype);
    check_aligned();
    detail::flash_attention_backward(ctx, shape, dtype, query, key, value, out, grad_out, static_cast<const float*>(lse),
                                     grad_query, grad_key, grad_value);
    return;
  }
  detail::unfused_attention_backward(ctx, shape, dtype, query, key, value, grad_out, lse, grad_query, grad_key,
                                     grad_value);
}

}  // namespace sublet::ops::cuda
