// View ops: new sizes/strides/offset over the same Storage, never a copy (except reshape of a
// layout that cannot be viewed, and contiguous() of a non-contiguous tensor).
#include <algorithm>
#include <numeric>
#include <optional>

#include "core/errors.h"
#include "runtime/autograd/function.h"
#include "runtime/factories.h"
#include "runtime/kernel_args.h"

namespace sublet {
namespace {

using autograd::TensorList;

// Records a one-input view node whose gradient is `to_input(grad_out)`.
template <typename F>
Tensor recorded_view(const char* name, const Tensor& input, Tensor out, F to_input) {
  if (autograd::any_requires_grad({input})) {
    autograd::record(name, {input}, {out},
                     [to_input](const TensorList& grads) { return TensorList{to_input(grads[0])}; });
  }
  return out;
}

Shape infer_size(const char* op, const Shape& requested, std::int64_t numel, const Shape& input_sizes) {
  Shape sizes = requested;
  std::int64_t known = 1;
  std::optional<std::size_t> infer;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      if (infer) throw ShapeError(std::string(op) + ": only one dimension can be -1, got " + shape_str(requested));
      infer = i;
    } else if (sizes[i] < 0) {
      throw ShapeError(std::string(op) + ": invalid size in shape " + shape_str(requested));
    } else {
      known *= sizes[i];
    }
  }
  if (infer && known != 0 && numel % known == 0) sizes[*infer] = numel / known;
  if (shape_numel(sizes) != numel || (infer && known == 0)) {
    throw ShapeError(std::string(op) + ": shape " + shape_str(requested) + " is invalid for input of shape " +
                     shape_str(input_sizes) + " (" + std::to_string(numel) + " elements)");
  }
  return sizes;
}

// Strides that view old_sizes/old_strides as new_sizes without moving data, if any exist
// (the algorithm of PyTorch's computeStride: split or merge runs of contiguous dims).
std::optional<Shape> view_strides(const Shape& old_sizes, const Shape& old_strides, const Shape& new_sizes) {
  if (old_sizes.empty()) return Shape(new_sizes.size(), 1);
  if (shape_numel(old_sizes) == 0) return contiguous_strides(new_sizes);
  Shape new_strides(new_sizes.size(), 1);
  auto view_d = static_cast<std::int64_t>(new_sizes.size()) - 1;
  std::int64_t chunk_base_stride = old_strides.back();
  std::int64_t tensor_numel = 1;
  std::int64_t view_numel = 1;
  for (auto tensor_d = static_cast<std::int64_t>(old_sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_sizes[tensor_d];
    if (tensor_d == 0 ||
        (old_sizes[tensor_d - 1] != 1 && old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

Tensor reshape_grad_to(const Tensor& grad, const Shape& sizes) { return grad.reshape(sizes); }

}  // namespace

Tensor Tensor::view(const Shape& requested) const {
  const Shape sizes_new = infer_size("view", requested, numel(), sizes());
  auto strides_new = view_strides(sizes(), strides(), sizes_new);
  if (!strides_new) {
    throw ShapeError("view: shape " + shape_str(requested) + " is not compatible with the strides " +
                     shape_str(strides()) + " of the input of shape " + shape_str(sizes()) +
                     "; use reshape() (which copies when needed)");
  }
  Tensor out = detail::make_view(*this, sizes_new, *strides_new, storage_offset());
  return recorded_view("view", *this, out, [in = sizes()](const Tensor& g) { return reshape_grad_to(g, in); });
}

Tensor Tensor::reshape(const Shape& requested) const {
  const Shape sizes_new = infer_size("reshape", requested, numel(), sizes());
  if (view_strides(sizes(), strides(), sizes_new)) return view(sizes_new);
  return contiguous().view(sizes_new);
}

Tensor Tensor::permute(const Shape& dims) const {
  if (static_cast<std::int64_t>(dims.size()) != dim()) {
    throw ShapeError("permute: " + shape_str(dims) + " does not order the " + std::to_string(dim()) +
                     " dimensions of a tensor of shape " + shape_str(sizes()));
  }
  Shape sizes_new(dims.size()), strides_new(dims.size()), inverse(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::int64_t d = wrap_dim("permute", dims[i], sizes());
    if (seen[d]) throw ShapeError("permute: dimension " + std::to_string(dims[i]) + " repeats in " + shape_str(dims));
    seen[d] = true;
    sizes_new[i] = sizes()[d];
    strides_new[i] = strides()[d];
    inverse[d] = static_cast<std::int64_t>(i);
  }
  Tensor out = detail::make_view(*this, sizes_new, strides_new, storage_offset());
  return recorded_view("permute", *this, out, [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor Tensor::transpose(std::int64_t dim0, std::int64_t dim1) const {
  Shape order(dim());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[wrap_dim("transpose", dim0, sizes())], order[wrap_dim("transpose", dim1, sizes())]);
  return permute(order);
}

Tensor Tensor::t() const {
  if (dim() != 2) throw ShapeError("t: expected a 2-D tensor, got shape " + shape_str(sizes()));
  return transpose(0, 1);
}

Tensor Tensor::slice(std::int64_t dim_, std::int64_t start, std::int64_t end, std::int64_t step) const {
  const std::int64_t d = wrap_dim("slice", dim_, sizes());
  if (step <= 0) throw ValueError("slice: step must be positive, got " + std::to_string(step));
  const std::int64_t n = sizes()[d];
  // Python rules: negative positions count from the end, out-of-range ones are clamped.
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<std::int64_t>(start, 0, n);
  end = std::clamp<std::int64_t>(end, start, n);
  Shape sizes_new = sizes();
  Shape strides_new = strides();
  sizes_new[d] = (end - start + step - 1) / step;
  strides_new[d] = strides()[d] * step;
  Tensor out = detail::make_view(*this, sizes_new, strides_new, storage_offset() + start * strides()[d]);
  if (autograd::any_requires_grad({*this})) {
    autograd::record("slice", {*this}, {out},
                     [in = sizes(), d, start, end, step, opts = options()](const TensorList& grads,
                                                                           const autograd::BackwardContext& context) {
                       // Slices of one tensor (q, k and v of one projection): once one has given
                       // its gradient, the others add into their part of it, instead of each
                       // filling a whole input of zeros for the engine to add.
                       const Tensor sum_into = context.gradient_sum_target(0);
                       if (sum_into.defined()) {
                         sum_into.slice(d, start, end, step).add_(grads[0]);
                         return TensorList{sum_into};
                       }
                       Tensor grad_input = zeros(in, opts);
                       grad_input.slice(d, start, end, step).copy_(grads[0]);
                       return TensorList{grad_input};
                     });
  }
  return out;
}

Tensor Tensor::narrow(std::int64_t dim_, std::int64_t start, std::int64_t length) const {
  const std::int64_t d = wrap_dim("narrow", dim_, sizes());
  if (start < 0) start += sizes()[d];
  if (start < 0 || length < 0 || start + length > sizes()[d]) {
    throw ShapeError("narrow: start " + std::to_string(start) + " and length " + std::to_string(length) +
                     " do not fit dimension " + std::to_string(dim_) + " of shape " + shape_str(sizes()));
  }
  return slice(d, start, start + length);
}

Tensor Tensor::select(std::int64_t dim_, std::int64_t index) const {
  const std::int64_t d = wrap_dim("select", dim_, sizes());
  if (index < -sizes()[d] || index >= sizes()[d]) {
    throw ShapeError("select: index " + std::to_string(index) + " is out of range for dimension " +
                     std::to_string(dim_) + " of shape " + shape_str(sizes()));
  }
  return narrow(d, index < 0 ? index + sizes()[d] : index, 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& requested) const {
  if (requested.size() < sizes().size()) {
    throw ShapeError("expand: cannot expand shape " + shape_str(sizes()) + " to " + shape_str(requested));
  }
  const std::size_t lead = requested.size() - sizes().size();
  Shape target = requested;
  for (std::size_t i = 0; i < sizes().size(); ++i) {
    if (target[lead + i] == -1) target[lead + i] = sizes()[i];
  }
  const Shape strides_new = broadcast_strides("expand", sizes(), strides(), target);
  Tensor out = detail::make_view(*this, target, strides_new, storage_offset());
  return recorded_view("expand", *this, out, [in = sizes()](const Tensor& g) { return detail::sum_to(g, in); });
}

Tensor Tensor::squeeze() const {
  Shape sizes_new, strides_new;
  for (std::int64_t d = 0; d < dim(); ++d) {
    if (sizes()[d] != 1) {
      sizes_new.push_back(sizes()[d]);
      strides_new.push_back(strides()[d]);
    }
  }
  Tensor out = detail::make_view(*this, sizes_new, strides_new, storage_offset());
  return recorded_view("squeeze", *this, out, [in = sizes()](const Tensor& g) { return reshape_grad_to(g, in); });
}

Tensor Tensor::squeeze(std::int64_t dim_) const {
  const std::int64_t d = wrap_dim("squeeze", dim_, sizes());
  if (sizes()[d] != 1) return *this;
  Shape sizes_new = sizes(), strides_new = strides();
  sizes_new.erase(sizes_new.begin() + d);
  strides_new.erase(strides_new.begin() + d);
  Tensor out = detail::make_view(*this, sizes_new, strides_new, storage_offset());
  return recorded_view("squeeze", *this, out, [in = sizes()](const Tensor& g) { return reshape_grad_to(g, in); });
}

Tensor Tensor::unsqueeze(std::int64_t dim_) const {
  Shape with_extra = sizes();
  with_extra.push_back(1);
  const std::int64_t d = wrap_dim("unsqueeze", dim_, with_extra);
  Shape sizes_new = sizes(), strides_new = strides();
  const std::int64_t stride_new = d < dim() ? strides()[d] * sizes()[d] : 1;
  sizes_new.insert(sizes_new.begin() + d, 1);
  strides_new.insert(strides_new.begin() + d, stride_new);
  Tensor out = detail::make_view(*this, sizes_new, strides_new, storage_offset());
  return recorded_view("unsqueeze", *this, out, [in = sizes()](const Tensor& g) { return reshape_grad_to(g, in); });
}

Tensor Tensor::flatten(std::int64_t start_dim, std::int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const std::int64_t s = wrap_dim("flatten", start_dim, sizes());
  const std::int64_t e = wrap_dim("flatten", end_dim, sizes());
  if (s > e) throw ShapeError("flatten: start_dim " + std::to_string(start_dim) + " is after end_dim " +
                              std::to_string(end_dim) + " for shape " + shape_str(sizes()));
  Shape sizes_new(sizes().begin(), sizes().begin() + s);
  sizes_new.push_back(std::accumulate(sizes().begin() + s, sizes().begin() + e + 1, std::int64_t{1},
                                      std::multiplies<>()));
  sizes_new.insert(sizes_new.end(), sizes().begin() + e + 1, sizes().end());
  return reshape(sizes_new);
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : contiguous(MemoryFormat::Contiguous); }

}  // namespace sublet
