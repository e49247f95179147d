// Matrix products with torch.matmul's rules: 1-D operands gain a dimension that the result
// drops; from 2-D on, the dimensions before the last two are batch dimensions that broadcast.
// Every product is one strided-batched kernel call (cuBLAS strided-batched on CUDA): a batched
// operand times a 2-D one is folded into a single 2-D product where its layout allows, and
// broadcast batch dimensions become a batch stride (0 for a matrix shared by the whole batch).
#include "core/errors.h"
#include "ops/matmul.h"
#include "runtime/autocast.h"
#include "runtime/autograd/function.h"
#include "runtime/kernel_args.h"

namespace sublet {
namespace {

using autograd::TensorList;

struct Operand {
  Tensor tensor;  // a layout the kernel reads (a copy only when the view had no unit stride)
  std::int64_t batch_stride = 0, row_stride = 0, col_stride = 0;
};

// The single stride that steps through the flattened batch dims of `t` (sizes `batch`, the
// leading t.dim() - 2 dims), or -1 when no single stride does.
std::int64_t flat_batch_stride(const Tensor& t) {
  const std::int64_t nb = t.dim() - 2;
  std::int64_t stride = 0, inner_span = 0;  // inner_span: elements one step of the outer dim must skip
  bool first = true;
  for (std::int64_t d = nb - 1; d >= 0; --d) {
    const std::int64_t size = t.size(d), st = t.stride(d);
    if (size == 1) continue;
    if (first) {
      stride = st;
      inner_span = st * size;
      first = false;
    } else if (st != inner_span) {
      return -1;
    } else {
      inner_span = st * size;
    }
  }
  return stride;
}

// `t` ([..., rows, cols], batch dims already expanded to the common batch) as a kernel operand.
Operand operand(const Tensor& t) {
  Tensor x = t;
  const std::int64_t r = x.dim() - 2;
  std::int64_t batch_stride = flat_batch_stride(x);
  const bool rows_ok = ops::matmul_operand_ok(x.size(r), x.size(r + 1), x.stride(r), x.stride(r + 1));
  if (!rows_ok || batch_stride < 0) {
    x = x.contiguous();
    batch_stride = flat_batch_stride(x);
  }
  return {x, batch_stride, x.stride(r), x.stride(r + 1)};
}

Shape batch_dims(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end() - 2); }

// a [..., m, k] @ b [..., k, n], both at least 2-D.
Tensor matmul_forward(const Tensor& a, const Tensor& b) {
  const std::int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  if (k != b.size(-2)) {
    throw ShapeError("matmul: shapes " + shape_str(a.sizes()) + " and " + shape_str(b.sizes()) +
                     " cannot be multiplied (" + std::to_string(k) + " columns vs " + std::to_string(b.size(-2)) +
                     " rows)");
  }
  NoGradGuard no_grad;  // layout copies are internal: the node below covers the whole op
  if (b.dim() == 2 && a.dim() > 2) {
    // One 2-D product over all rows of a: one large GEMM instead of a batch of small ones.
    const Tensor rows = a.reshape({-1, k});
    Shape out_sizes = batch_dims(a);
    out_sizes.push_back(m);
    out_sizes.push_back(n);
    return matmul_forward(rows, b).view(out_sizes);
  }
  Shape batch;
  try {
    batch = broadcast_shapes("matmul", batch_dims(a), batch_dims(b));
  } catch (const ShapeError&) {
    throw ShapeError("matmul: the batch dimensions of shapes " + shape_str(a.sizes()) + " and " +
                     shape_str(b.sizes()) + " cannot be broadcast");
  }
  Shape a_sizes = batch, b_sizes = batch, out_sizes = batch;
  a_sizes.push_back(m);
  a_sizes.push_back(k);
  b_sizes.push_back(k);
  b_sizes.push_back(n);
  out_sizes.push_back(m);
  out_sizes.push_back(n);
  const Operand x = operand(a.expand(a_sizes)), y = operand(b.expand(b_sizes));
  ops::MatmulGeometry g;
  g.batch = shape_numel(batch);
  g.m = m;
  g.k = k;
  g.n = n;
  g.a_batch_stride = x.batch_stride;
  g.a_row_stride = x.row_stride;
  g.a_col_stride = x.col_stride;
  g.b_batch_stride = y.batch_stride;
  g.b_row_stride = y.row_stride;
  g.b_col_stride = y.col_stride;
  Tensor out = Tensor::empty(out_sizes, a.options());
  ops::matmul(detail::context_for(out), a.dtype(), g, out.data_ptr(), x.tensor.data_ptr(), y.tensor.data_ptr());
  return out;
}

}  // namespace

Tensor Tensor::matmul(const Tensor& other) const {
  detail::check_defined("matmul", *this);
  detail::check_defined("matmul", other);
  if (amp::casts_to_lower({*this, other})) return amp::to_lower(*this).matmul(amp::to_lower(other));
  detail::check_same_device("matmul", *this, other);
  detail::check_same_dtype("matmul", *this, other);
  detail::check_floating("matmul", *this);
  if (dim() == 0 || other.dim() == 0) {
    throw ShapeError("matmul: both operands need at least one dimension, got shapes " + shape_str(sizes()) + " and " +
                     shape_str(other.sizes()));
  }
  // 1-D operands as torch.matmul: a vector on the left is a row, on the right a column, and
  // the dimension added for it is removed from the result (views: autograd sees through them).
  if (other.dim() == 1) return matmul(other.unsqueeze(-1)).squeeze(-1);
  if (dim() == 1) return unsqueeze(0).matmul(other).squeeze(-2);
  Tensor out = matmul_forward(*this, other);
  if (autograd::any_requires_grad({*this, other})) {
    const bool need_a = requires_grad(), need_b = other.requires_grad();
    autograd::record("matmul", {*this, other}, {out},
                     [a = need_b ? autograd::save(*this) : Tensor(), b = need_a ? autograd::save(other) : Tensor(),
                      sa = sizes(), sb = other.sizes(),
                      b_is_transposed = other.dim() == 2 && other.stride(0) == 1 && other.stride(1) == other.size(0) &&
                                        other.size(0) > 1 && other.size(1) > 1](const TensorList& g) {
                       Tensor ga, gb;
                       if (b.defined()) ga = detail::sum_to(matmul_forward(g[0], b.transpose(-2, -1)), sa);
                       if (a.defined()) {
                         if (b_is_transposed) {
                           // other = W.t() of a row-major W (a linear's weight): W's gradient
                           // g^T a comes out row-major, so the leaf takes it without a copy.
                           gb = matmul_forward(g[0].reshape({-1, g[0].size(-1)}).t(), a.reshape({-1, a.size(-1)})).t();
                         } else if (sb.size() == 2 && a.dim() > 2) {
                           // A 2-D weight under a batched input: one [k, rows] @ [rows, n] product
                           // instead of a batch of products summed afterwards.
                           gb = matmul_forward(a.reshape({-1, a.size(-1)}).t(), g[0].reshape({-1, g[0].size(-1)}));
                         } else {
                           gb = detail::sum_to(matmul_forward(a.transpose(-2, -1), g[0]), sb);
                         }
                       }
                       return TensorList{ga, gb};
                     });
  }
  return out;
}

}  // namespace sublet
