// Reductions (sum, mean, max/min with indices, argmax), gather, and sum_to (the reverse of
// broadcasting), with their backward closures.
#include <algorithm>

#include "core/errors.h"
#include "ops/reduce.h"
#include "runtime/autocast.h"
#include "runtime/autograd/function.h"
#include "runtime/factories.h"
#include "runtime/kernel_args.h"

namespace sublet {
namespace {

using autograd::save;
using autograd::TensorList;

// Which dims a reduction removes; empty `dims` means all of them.
std::vector<bool> reduced_dims(const char* op, const Tensor& t, const Shape& dims) {
  std::vector<bool> reduce(t.dim(), dims.empty());
  for (auto d : dims) {
    const std::int64_t w = wrap_dim(op, d, t.sizes());
    if (reduce[w]) throw ShapeError(std::string(op) + ": dimension " + std::to_string(d) + " repeats in " + shape_str(dims));
    reduce[w] = true;
  }
  return reduce;
}

ops::ReduceGeometry geometry_of(const Tensor& t, const std::vector<bool>& reduce) {
  ops::ReduceGeometry g;
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    (reduce[d] ? g.inner_sizes : g.outer_sizes).push_back(t.sizes()[d]);
    (reduce[d] ? g.inner_strides : g.outer_strides).push_back(t.strides()[d]);
  }
  return g;
}

Shape keepdim_shape(const Tensor& t, const std::vector<bool>& reduce) {
  Shape s = t.sizes();
  for (std::size_t d = 0; d < s.size(); ++d) if (reduce[d]) s[d] = 1;
  return s;
}

Shape reduced_shape(const Tensor& t, const std::vector<bool>& reduce, bool keepdim) {
  if (keepdim) return keepdim_shape(t, reduce);
  Shape s;
  for (std::size_t d = 0; d < reduce.size(); ++d) if (!reduce[d]) s.push_back(t.sizes()[d]);
  return s;
}

Tensor sum_impl(const char* op, const Tensor& x, const Shape& dims, bool keepdim, bool mean) {
  if (amp::casts_to_float32({x})) return sum_impl(op, amp::to_float32(x), dims, keepdim, mean);
  detail::check_defined(op, x);
  if (mean) detail::check_floating(op, x);
  const auto reduce = reduced_dims(op, x, dims);
  const auto g = geometry_of(x, reduce);
  const std::int64_t count = shape_numel(g.inner_sizes);
  Tensor out = Tensor::empty(reduced_shape(x, reduce, keepdim), x.options());
  if (mean && count == 0) throw ShapeError(std::string(op) + ": cannot average over zero elements of " + shape_str(x.sizes()));
  ops::reduce_sum(detail::context_for(x), x.dtype(), g, out.data_ptr(), x.data_ptr(), mean ? 1.0 / count : 1.0);
  if (autograd::any_requires_grad({x})) {
    autograd::record(op, {x}, {out}, [in = x.sizes(), kept = keepdim_shape(x, reduce), mean, count](const TensorList& gr) {
      Tensor grad = gr[0].reshape(kept).expand(in);
      return TensorList{mean ? grad / static_cast<double>(count) : grad};
    });
  }
  return out;
}

// target[..., index[..., j, ...], ...] += src[..., j, ...] along dim; index and src share a shape
// that matches target's except along dim.
void scatter_add_into(Tensor& target, std::int64_t dim, const Tensor& index, const Tensor& src) {
  ops::ScatterGeometry g;
  for (std::int64_t d = 0; d < target.dim(); ++d) {
    if (d == dim) continue;
    g.outer_sizes.push_back(index.sizes()[d]);
    g.out_outer_strides.push_back(target.strides()[d]);
    g.index_strides.push_back(index.strides()[d]);
    g.src_strides.push_back(src.strides()[d]);
  }
  g.index_strides.push_back(index.strides()[dim]);
  g.src_strides.push_back(src.strides()[dim]);
  g.out_dim_stride = target.strides()[dim];
  g.out_dim_size = target.sizes()[dim];
  g.index_count = index.sizes()[dim];
  ops::scatter_add(detail::context_for(target), target.dtype(), g, target.data_ptr(),
                   static_cast<const std::int64_t*>(index.data_ptr()), src.data_ptr());
}

std::pair<Tensor, Tensor> extremum(const char* op, ops::ExtremumKind kind, const Tensor& x, std::int64_t dim_,
                                   bool keepdim) {
  detail::check_defined(op, x);
  const std::int64_t d = wrap_dim(op, dim_, x.sizes());
  if (x.sizes()[d] == 0) throw ShapeError(std::string(op) + ": dimension " + std::to_string(dim_) + " of shape " + shape_str(x.sizes()) + " is empty");
  std::vector<bool> reduce(x.dim(), false);
  reduce[d] = true;
  const auto g = geometry_of(x, reduce);
  const Shape shape = reduced_shape(x, reduce, keepdim);
  Tensor values = Tensor::empty(shape, x.options());
  Tensor indices = Tensor::empty(shape, TensorOptions().dtype(DType::Int64).device(x.device()));
  ops::reduce_extremum(detail::context_for(x), kind, x.dtype(), g, values.data_ptr(),
                       static_cast<std::int64_t*>(indices.data_ptr()), x.data_ptr());
  if (autograd::any_requires_grad({x})) {
    const Shape kept = keepdim_shape(x, reduce);
    autograd::record(op, {x}, {values, indices},
                     [idx = save(indices.reshape(kept)), in = x.sizes(), kept, d](const TensorList& gr) {
                       Tensor grad_input = zeros(in, gr[0].options());
                       scatter_add_into(grad_input, d, idx, gr[0].reshape(kept));
                       return TensorList{grad_input};
                     });
  }
  return {values, indices};
}

}  // namespace

Tensor Tensor::sum() const { return sum_impl("sum", *this, {}, false, false); }
Tensor Tensor::sum(const Shape& dims, bool keepdim) const { return sum_impl("sum", *this, dims, keepdim, false); }
Tensor Tensor::mean() const { return sum_impl("mean", *this, {}, false, true); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return sum_impl("mean", *this, dims, keepdim, true); }

std::pair<Tensor, Tensor> Tensor::max(std::int64_t dim_, bool keepdim) const {
  return extremum("max", ops::ExtremumKind::Max, *this, dim_, keepdim);
}
std::pair<Tensor, Tensor> Tensor::min(std::int64_t dim_, bool keepdim) const {
  return extremum("min", ops::ExtremumKind::Min, *this, dim_, keepdim);
}
Tensor Tensor::max() const { return reshape({-1}).max(0).first; }
Tensor Tensor::min() const { return reshape({-1}).min(0).first; }
Tensor Tensor::argmax(std::int64_t dim_, bool keepdim) const { return max(dim_, keepdim).second; }
Tensor Tensor::argmax() const {
  NoGradGuard no_grad;
  return reshape({-1}).max(0).second;
}

Tensor Tensor::gather(std::int64_t dim_, const Tensor& index) const {
  detail::check_defined("gather", index);
  detail::check_same_device("gather", *this, index);
  if (index.dtype() != DType::Int64) {
    throw DTypeError(std::string("gather: index must be int64, got ") + dtype_name(index.dtype()));
  }
  const std::int64_t d = wrap_dim("gather", dim_, sizes());
  bool fits = index.dim() == dim();
  for (std::int64_t i = 0; fits && i < dim(); ++i) fits = i == d || index.sizes()[i] == sizes()[i];
  if (!fits) {
    throw ShapeError("gather: index of shape " + shape_str(index.sizes()) + " must match the input of shape " +
                     shape_str(sizes()) + " in every dimension but " + std::to_string(dim_));
  }
  ops::ScatterGeometry g;
  Shape out_sizes;
  Shape order;  // the output is produced with `d` last, then permuted back
  for (std::int64_t i = 0; i < dim(); ++i) {
    if (i == d) continue;
    g.outer_sizes.push_back(index.sizes()[i]);
    g.out_outer_strides.push_back(strides()[i]);
    g.index_strides.push_back(index.strides()[i]);
    out_sizes.push_back(index.sizes()[i]);
  }
  g.index_strides.push_back(index.strides()[d]);
  g.out_dim_stride = strides()[d];
  g.out_dim_size = sizes()[d];
  g.index_count = index.sizes()[d];
  out_sizes.push_back(index.sizes()[d]);
  Tensor produced = Tensor::empty(out_sizes, options());
  ops::gather(detail::context_for(*this), dtype(), g, produced.data_ptr(),
              static_cast<const std::int64_t*>(index.data_ptr()), data_ptr());
  for (std::int64_t i = 0; i < dim(); ++i) order.push_back(i < d ? i : (i == d ? dim() - 1 : i - 1));
  Tensor out;
  {
    NoGradGuard no_grad;
    out = produced.permute(order);
  }
  if (autograd::any_requires_grad({*this})) {
    autograd::record("gather", {*this}, {out}, [idx = save(index), in = sizes(), d](const TensorList& gr) {
      Tensor grad_input = zeros(in, gr[0].options());
      scatter_add_into(grad_input, d, idx, gr[0]);
      return TensorList{grad_input};
    });
  }
  return out;
}

namespace detail {

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.sizes() == shape) return grad;
  const auto lead = static_cast<std::int64_t>(grad.dim() - shape.size());
  if (lead < 0) throw ShapeError("sum_to: cannot reduce shape " + shape_str(grad.sizes()) + " to " + shape_str(shape));
  Shape dims;
  for (std::int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && grad.sizes()[d] != 1)) dims.push_back(d);
  }
  if (dims.empty()) return grad.reshape(shape);
  return grad.sum(dims, true).reshape(shape);
}

}  // namespace detail
}  // namespace sublet
