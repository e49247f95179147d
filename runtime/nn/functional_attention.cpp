// scaled_dot_product_attention and packed_self_attention: one ops::attention_forward call and one
// node whose backward calls ops::attention_backward with the saved log-sum-exp (no T x T matrix
// is kept between the passes).
#include <array>
#include <cmath>
#include <optional>
#include <string>

#include "ops/attention.h"
#include "runtime/autocast.h"
#include "runtime/autograd/function.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/functional_checks.h"

namespace sublet::nn::functional {

using autograd::TensorList;

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
constexpr const char* kPackedOp = "packed_self_attention";

bool is_16_bit(DType dtype) { return dtype == DType::BFloat16 || dtype == DType::Float16; }

ops::AttentionStrides strides_of(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

// `t` itself when the kernels can read it in place (unit stride over D; for 16-bit, 16-byte
// aligned rows for the fused kernels' vector loads), else a contiguous copy.
Tensor readable(const Tensor& t) {
  const bool unit_inner = t.size(3) == 1 || t.stride(3) == 1;
  const bool aligned = !is_16_bit(t.dtype()) || ops::attention_rows_aligned(t.data_ptr(), strides_of(t), t.dtype());
  return unit_inner && aligned ? t : t.contiguous();
}

// [B, H, T, D] with [B, T, H, D] memory order: the layout the attention's output is read in
// next (heads merged back into [B, T, H * D]), as PyTorch's flash kernels return it.
Tensor empty_tokens_major(std::int64_t b, std::int64_t h, std::int64_t t, std::int64_t d, TensorOptions options) {
  return Tensor::empty_strided({b, h, t, d}, {t * h * d, d, h * d, 1}, options);
}

// The gradient of an operand in the operand's own layout when dense, else tokens-major.
Tensor empty_gradient_like(const Tensor& operand) {
  if (operand.is_non_overlapping_and_dense()) return Tensor::empty_strided(operand.sizes(), operand.strides(), operand.options());
  return empty_tokens_major(operand.size(0), operand.size(1), operand.size(2), operand.size(3), operand.options());
}

void check_operands(const Tensor& q, const Tensor& k, const Tensor& v) {
  sublet::detail::check_defined(kOp, q);
  nn::detail::check_like_input(kOp, q, k);
  nn::detail::check_like_input(kOp, q, v);
  sublet::detail::check_floating(kOp, q);
  nn::detail::check_rank(kOp, "query", q, 4, "(B,H,T,D)");
  nn::detail::check_rank(kOp, "key", k, 4, "(B,H,S,D)");
  nn::detail::check_rank(kOp, "value", v, 4, "(B,H,S,D)");
  const bool same_heads = k.size(0) == q.size(0) && k.size(1) == q.size(1) && k.size(3) == q.size(3);
  if (!same_heads || v.sizes() != k.sizes()) {
    throw ShapeError(std::string(kOp) + ": key and value must be [" + std::to_string(q.size(0)) + ", " +
                     std::to_string(q.size(1)) + ", S, " + std::to_string(q.size(3)) + "] for query " +
                     shape_str(q.sizes()) + ", got key " + shape_str(k.sizes()) + " and value " +
                     shape_str(v.sizes()));
  }
  if (q.size(3) == 0) throw ShapeError(std::string(kOp) + ": head dimension D must be > 0, got query " + shape_str(q.sizes()));
  if (k.size(2) == 0 && q.size(2) > 0) {
    throw ShapeError(std::string(kOp) + ": key length S must be > 0, got key " + shape_str(k.sizes()));
  }
}

ops::AttentionShape attention_shape(std::int64_t batch, std::int64_t heads, std::int64_t query_len,
                                    std::int64_t key_len, std::int64_t head_dim, bool is_causal,
                                    std::optional<double> scale, const char* op) {
  ops::AttentionShape shape;
  shape.batch = batch;
  shape.heads = heads;
  shape.query_len = query_len;
  shape.key_len = key_len;
  shape.head_dim = head_dim;
  shape.causal = is_causal;
  shape.scale = scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
  if (!(std::isfinite(shape.scale) && shape.scale != 0)) {
    throw ValueError(std::string(op) + ": scale must be finite and non-zero, got " + std::to_string(shape.scale));
  }
  return shape;
}

// q, k, v (index 0, 1, 2) of a [B, T, 3 * H * D] projection with a unit last stride, as
// [B, H, T, D] operands: element offset i * H * D, strides (batch, D, token).
ops::AttentionRef packed_operand(const Tensor& packed, std::int64_t index, std::int64_t heads) {
  const std::int64_t width = packed.size(2) / 3, head_dim = width / heads;
  char* base = static_cast<char*>(packed.data_ptr()) +
               static_cast<std::ptrdiff_t>(index * width) * static_cast<std::ptrdiff_t>(element_size(packed.dtype()));
  return {base, {packed.stride(0), head_dim, packed.stride(1)}};
}

ops::ConstAttentionRef as_const(const ops::AttentionRef& ref) { return {ref.data, ref.strides}; }

// Whether the kernels can read q, k and v of `packed` in place (unit last stride; for 16-bit,
// 16-byte aligned rows).
bool packed_readable(const Tensor& packed, std::int64_t heads) {
  if (packed.size(2) > 1 && packed.stride(2) != 1) return false;
  if (!is_16_bit(packed.dtype())) return true;
  for (std::int64_t i = 0; i < 3; ++i) {
    const ops::AttentionRef ref = packed_operand(packed, i, heads);
    if (!ops::attention_rows_aligned(ref.data, ref.strides, packed.dtype())) return false;
  }
  return true;
}

// The three [B, H, T, D] views of a packed projection.
std::array<Tensor, 3> split_packed(const Tensor& qkv, std::int64_t heads) {
  const std::int64_t batch = qkv.size(0), tokens = qkv.size(1), width = qkv.size(2) / 3;
  std::array<Tensor, 3> views;
  for (std::int64_t i = 0; i < 3; ++i) {
    views[static_cast<std::size_t>(i)] =
        qkv.narrow(2, i * width, width).view({batch, tokens, heads, width / heads}).transpose(1, 2);
  }
  return views;
}

void check_packed(const Tensor& qkv, std::int64_t heads) {
  sublet::detail::check_defined(kPackedOp, qkv);
  sublet::detail::check_floating(kPackedOp, qkv);
  nn::detail::check_rank(kPackedOp, "qkv", qkv, 3, "(B,T,3*H*D)");
  if (heads < 1 || qkv.size(2) == 0 || qkv.size(2) % (3 * heads) != 0) {
    throw ShapeError(std::string(kPackedOp) + ": the last dim must be 3 * heads * head_dim with heads >= 1 and " +
                     "head_dim >= 1, got qkv " + shape_str(qkv.sizes()) + " and heads " + std::to_string(heads));
  }
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value, bool is_causal,
                                    std::optional<double> scale) {
  if (amp::casts_to_lower({query, key, value})) {
    return scaled_dot_product_attention(amp::to_lower(query), amp::to_lower(key), amp::to_lower(value), is_causal,
                                        scale);
  }
  check_operands(query, key, value);
  const ops::AttentionShape shape = attention_shape(query.size(0), query.size(1), query.size(2), key.size(2),
                                                    query.size(3), is_causal, scale, kOp);

  Tensor q, k, v, out, lse;
  {
    NoGradGuard no_grad;
    q = readable(query);
    k = readable(key);
    v = readable(value);
    out = empty_tokens_major(shape.batch, shape.heads, shape.query_len, shape.head_dim, query.options());
    lse = Tensor::empty({shape.batch, shape.heads, shape.query_len},
                        query.options().dtype(ops::attention_lse_dtype(query.dtype())));
    ops::attention_forward(sublet::detail::context_for(out), shape, query.dtype(), {q.data_ptr(), strides_of(q)},
                           {k.data_ptr(), strides_of(k)}, {v.data_ptr(), strides_of(v)},
                           {out.data_ptr(), strides_of(out)}, lse.data_ptr());
  }
  if (autograd::any_requires_grad({query, key, value})) {
    autograd::record(kOp, {query, key, value}, {out},
                     [shape, q = autograd::save(q), k = autograd::save(k), v = autograd::save(v),
                      out = autograd::save(out), lse = autograd::save(lse)](const TensorList& grads) {
                       Tensor grad_q = empty_gradient_like(q), grad_k = empty_gradient_like(k),
                              grad_v = empty_gradient_like(v);
                       if (shape.query_len == 0) {  // no query row: the keys and values got no gradient
                         grad_k.zero_();
                         grad_v.zero_();
                         return TensorList{grad_q, grad_k, grad_v};
                       }
                       const Tensor grad_out = readable(grads[0]);
                       ops::attention_backward(
                           sublet::detail::context_for(grad_out), shape, grad_out.dtype(), {q.data_ptr(), strides_of(q)},
                           {k.data_ptr(), strides_of(k)}, {v.data_ptr(), strides_of(v)},
                           {out.data_ptr(), strides_of(out)}, {grad_out.data_ptr(), strides_of(grad_out)},
                           lse.data_ptr(), {grad_q.data_ptr(), strides_of(grad_q)},
                           {grad_k.data_ptr(), strides_of(grad_k)}, {grad_v.data_ptr(), strides_of(grad_v)});
                       return TensorList{grad_q, grad_k, grad_v};
                     });
  }
  return out;
}

Tensor packed_self_attention(const Tensor& qkv, std::int64_t heads, bool is_causal, std::optional<double> scale) {
  if (amp::casts_to_lower({qkv})) return packed_self_attention(amp::to_lower(qkv), heads, is_causal, scale);
  check_packed(qkv, heads);
  Tensor packed = packed_readable(qkv, heads) ? qkv : qkv.contiguous();
  if (!packed_readable(packed, heads)) {
    // A head dim whose rows can't be 16-byte aligned in this layout: the general op copies.
    const std::array<Tensor, 3> views = split_packed(qkv, heads);
    return scaled_dot_product_attention(views[0], views[1], views[2], is_causal, scale);
  }
  const std::int64_t batch = qkv.size(0), tokens = qkv.size(1), head_dim = qkv.size(2) / 3 / heads;
  const ops::AttentionShape shape = attention_shape(batch, heads, tokens, tokens, head_dim, is_causal, scale, kPackedOp);

  Tensor out, lse;
  {
    NoGradGuard no_grad;
    out = empty_tokens_major(batch, heads, tokens, head_dim, qkv.options());
    lse = Tensor::empty({batch, heads, tokens}, qkv.options().dtype(ops::attention_lse_dtype(qkv.dtype())));
    ops::attention_forward(sublet::detail::context_for(out), shape, qkv.dtype(),
                           as_const(packed_operand(packed, 0, heads)), as_const(packed_operand(packed, 1, heads)),
                           as_const(packed_operand(packed, 2, heads)), {out.data_ptr(), strides_of(out)},
                           lse.data_ptr());
  }
  if (autograd::any_requires_grad({qkv})) {
    autograd::record(kPackedOp, {qkv}, {out},
                     [shape, heads, packed = autograd::save(packed), out = autograd::save(out),
                      lse = autograd::save(lse)](const TensorList& grads) {
                       // dQ, dK and dV cover every element of the projection's gradient.
                       Tensor grad = Tensor::empty(packed.sizes(), packed.options());
                       if (grad.numel() == 0) return TensorList{grad};
                       const Tensor grad_out = readable(grads[0]);
                       ops::attention_backward(
                           sublet::detail::context_for(grad_out), shape, grad_out.dtype(),
                           as_const(packed_operand(packed, 0, heads)), as_const(packed_operand(packed, 1, heads)),
                           as_const(packed_operand(packed, 2, heads)), {out.data_ptr(), strides_of(out)},
                           {grad_out.data_ptr(), strides_of(grad_out)}, lse.data_ptr(),
                           packed_operand(grad, 0, heads), packed_operand(grad, 1, heads),
                           packed_operand(grad, 2, heads));
                       return TensorList{grad};
                     });
  }
  return out;
}

}  // namespace sublet::nn::functional
