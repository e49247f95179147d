// Matrix products: 2-D, batched 3-D, and a 2-D operand broadcast over the other's batch.
#include "core/errors.h"
#include "ops/matmul.h"
#include "runtime/amp/autocast.h"
#include "runtime/autograd/function.h"
#include "runtime/kernel_args.h"

namespace sublet {
namespace {

using autograd::TensorList;

struct Operand {
  Tensor tensor;  // a layout the kernel reads (a copy only when the view had no unit stride)
  std::int64_t batch = 1, rows = 0, cols = 0, batch_stride = 0, row_stride = 0, col_stride = 0;
};

Operand operand(const Tensor& t) {
  Tensor x = t;
  const bool batched = t.dim() == 3;
  const std::int64_t r = batched ? 1 : 0;
  if (!ops::matmul_operand_ok(x.sizes()[r], x.sizes()[r + 1], x.strides()[r], x.strides()[r + 1])) x = x.clone();
  Operand op;
  op.tensor = x;
  op.batch = batched ? x.sizes()[0] : 1;
  op.rows = x.sizes()[r];
  op.cols = x.sizes()[r + 1];
  op.batch_stride = batched ? x.strides()[0] : 0;
  op.row_stride = x.strides()[r];
  op.col_stride = x.strides()[r + 1];
  return op;
}

Tensor matmul_forward(const Tensor& a, const Tensor& b) {
  const bool a_ok = a.dim() == 2 || a.dim() == 3, b_ok = b.dim() == 2 || b.dim() == 3;
  if (!a_ok || !b_ok) {
    throw ShapeError("matmul: expected 2-D or 3-D tensors, got shapes " + shape_str(a.sizes()) + " and " +
                     shape_str(b.sizes()));
  }
  if (a.sizes()[a.dim() - 1] != b.sizes()[b.dim() - 2]) {
    throw ShapeError("matmul: shapes " + shape_str(a.sizes()) + " and " + shape_str(b.sizes()) +
                     " cannot be multiplied (" + std::to_string(a.sizes()[a.dim() - 1]) + " columns vs " +
                     std::to_string(b.sizes()[b.dim() - 2]) + " rows)");
  }
  NoGradGuard no_grad;  // layout copies are internal: the node below covers the whole op
  const Operand x = operand(a), y = operand(b);
  if (a.dim() == 3 && b.dim() == 3 && x.batch != y.batch && x.batch != 1 && y.batch != 1) {
    throw ShapeError("matmul: batch sizes of shapes " + shape_str(a.sizes()) + " and " + shape_str(b.sizes()) +
                     " differ");
  }
  ops::MatmulGeometry g;
  g.batch = std::max(x.batch, y.batch);
  g.m = x.rows;
  g.k = x.cols;
  g.n = y.cols;
  g.a_batch_stride = x.batch == 1 ? 0 : x.batch_stride;
  g.a_row_stride = x.row_stride;
  g.a_col_stride = x.col_stride;
  g.b_batch_stride = y.batch == 1 ? 0 : y.batch_stride;
  g.b_row_stride = y.row_stride;
  g.b_col_stride = y.col_stride;
  const bool batched = a.dim() == 3 || b.dim() == 3;
  Tensor out = Tensor::empty(batched ? Shape{g.batch, g.m, g.n} : Shape{g.m, g.n}, a.options());
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
  Tensor out = matmul_forward(*this, other);
  if (autograd::any_requires_grad({*this, other})) {
    const bool need_a = requires_grad(), need_b = other.requires_grad();
    autograd::record("matmul", {*this, other}, {out},
                     [a = need_b ? autograd::save(*this) : Tensor(), b = need_a ? autograd::save(other) : Tensor(),
                      sa = sizes(), sb = other.sizes()](const TensorList& g) {
                       Tensor ga, gb;
                       if (b.defined()) ga = detail::sum_to(matmul_forward(g[0], b.transpose(-2, -1)), sa);
                       if (a.defined()) gb = detail::sum_to(matmul_forward(a.transpose(-2, -1), g[0]), sb);
                       return TensorList{ga, gb};
                     });
  }
  return out;
}

}  // namespace sublet
