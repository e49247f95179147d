// Memory formats as PyTorch has them: implied by strides, not stored. A channels-last tensor has
// its logical (N,C,H,W) sizes and NHWC-dense strides; ops that care (convolution, batch norm,
// pooling) ask suggest_memory_format(), element-wise ops keep whatever dense layout they get.
#include <algorithm>
#include <numeric>

#include "core/errors.h"
#include "ops/copy.h"
#include "runtime/autograd/function.h"
#include "runtime/factories.h"
#include "runtime/kernel_args.h"

namespace sublet {

namespace detail {

Shape format_strides(const Shape& sizes, MemoryFormat format) {
  if (format == MemoryFormat::Contiguous) return contiguous_strides(sizes);
  if (sizes.size() != 4) {
    throw ShapeError(std::string("channels_last: needs a 4-D (N,C,H,W) tensor, got shape ") + shape_str(sizes));
  }
  // PyTorch's get_channels_last_strides_2d, with sizes of 0 counted as 1 as contiguous_strides does.
  auto at_least_1 = [](std::int64_t s) { return std::max<std::int64_t>(s, 1); };
  Shape strides(4);
  strides[1] = 1;
  strides[3] = at_least_1(sizes[1]);
  strides[2] = strides[3] * at_least_1(sizes[3]);
  strides[0] = strides[2] * at_least_1(sizes[2]);
  return strides;
}

bool is_dense_layout(const Shape& sizes, const Shape& strides) {
  if (sizes.size() != strides.size()) return false;
  // (stride, size) of the dims that move, insertion-sorted by stride: Shapes keep a few values
  // inline, so this check (made on every element-wise op) allocates nothing.
  Shape dim_strides, dim_sizes;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return true;  // no elements: any strides lay them out
    if (sizes[d] == 1) continue;
    std::size_t at = dim_strides.size();
    dim_strides.push_back(strides[d]);
    dim_sizes.push_back(sizes[d]);
    for (; at > 0 && dim_strides[at - 1] > strides[d]; --at) {
      dim_strides[at] = dim_strides[at - 1];
      dim_sizes[at] = dim_sizes[at - 1];
    }
    dim_strides[at] = strides[d];
    dim_sizes[at] = sizes[d];
  }
  std::int64_t expected = 1;
  for (std::size_t i = 0; i < dim_strides.size(); ++i) {
    if (dim_strides[i] != expected) return false;
    expected *= dim_sizes[i];
  }
  return true;
}

bool same_layout(const Shape& sizes, const Shape& a, const Shape& b) {
  if (a.size() != sizes.size() || b.size() != sizes.size()) return false;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] != 1 && a[d] != b[d]) return false;
  }
  return true;
}

Tensor empty_in_layout_of(const Tensor& like, TensorOptions options) {
  if (like.is_non_overlapping_and_dense() && !like.is_contiguous()) {
    return Tensor::empty_strided(like.sizes(), like.strides(), options);
  }
  return Tensor::empty(like.sizes(), options, like.suggest_memory_format());
}

Tensor empty_elementwise_output(const Shape& sizes, TensorOptions options,
                                std::initializer_list<const Tensor*> operands) {
  for (const Tensor* t : operands) {
    if (t->sizes() != sizes || !t->is_non_overlapping_and_dense()) continue;
    if (t->is_contiguous()) break;
    return Tensor::empty_strided(sizes, t->strides(), options);
  }
  return Tensor::empty(sizes, options);
}

Tensor in_layout(const Tensor& t, const Shape& strides) {
  if (same_layout(t.sizes(), t.strides(), strides)) return t;
  Tensor out = Tensor::empty_strided(t.sizes(), strides, t.options());
  NoGradGuard no_grad;
  out.copy_(t);
  return out;
}

namespace {
bool all_zero(const Shape& sizes, const Shape& strides) {
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] != 1 && strides[d] != 0) return false;
  }
  return true;
}
}  // namespace

void coalesce_elementwise(Shape& sizes, ops::StridedRef& out, std::initializer_list<ops::ConstStridedRef*> inputs) {
  const std::size_t nd = sizes.size();
  if (nd <= 1 || out.strides.size() != nd) return;
  for (const ops::ConstStridedRef* in : inputs) {
    if (in->strides.size() != nd) return;  // the kernel reports the mismatch
  }
  if (is_dense_layout(sizes, out.strides)) {
    bool flat = true;
    for (const ops::ConstStridedRef* in : inputs) {
      flat = flat && (same_layout(sizes, in->strides, out.strides) || all_zero(sizes, in->strides));
    }
    if (flat) {
      const std::int64_t numel = shape_numel(sizes);
      for (ops::ConstStridedRef* in : inputs) in->strides = Shape{all_zero(sizes, in->strides) ? 0 : 1};
      sizes = Shape{numel};
      out.strides = Shape{1};
      return;
    }
  }
  Shape order(nd);
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return out.strides[a] > out.strides[b]; });
  bool identity = true;
  for (std::size_t i = 0; i < nd; ++i) identity = identity && order[i] == static_cast<std::int64_t>(i);
  if (identity) return;
  auto permuted = [&](const Shape& s) {
    Shape p(nd);
    for (std::size_t i = 0; i < nd; ++i) p[i] = s[order[i]];
    return p;
  };
  sizes = permuted(sizes);
  out.strides = permuted(out.strides);
  for (ops::ConstStridedRef* in : inputs) in->strides = permuted(in->strides);
}

}  // namespace detail

bool Tensor::is_contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::Contiguous) return is_contiguous();
  if (dim() != 4) return false;
  // PyTorch's compute_channels_last_contiguous_2d: C fastest, then W, H, N; size-1 dims ignored.
  std::int64_t expected = 1;
  for (const int d : {1, 3, 2, 0}) {
    if (sizes()[d] == 1) continue;
    if (strides()[d] != expected) return false;
    expected *= sizes()[d];
  }
  return true;
}

bool Tensor::is_non_overlapping_and_dense() const { return detail::is_dense_layout(sizes(), strides()); }

MemoryFormat Tensor::suggest_memory_format() const {
  if (dim() != 4) return MemoryFormat::Contiguous;
  // PyTorch's is_channels_last_strides_2d_s4: strides ordered C <= W <= H <= N (each at least the
  // span of the faster ones), a size-1 C and the N-versus-C tie resolved towards Contiguous.
  const Shape& sz = sizes();
  const Shape& st = strides();
  if (st[1] == 0) return MemoryFormat::Contiguous;
  std::int64_t min = 0;
  for (const int d : {1, 3, 2, 0}) {
    if (sz[d] == 0) return MemoryFormat::Contiguous;
    if (st[d] < min) return MemoryFormat::Contiguous;
    if (d == 0 && min == st[1]) return MemoryFormat::Contiguous;
    min = st[d];
    if (sz[d] > 1) min *= sz[d];
  }
  return MemoryFormat::ChannelsLast;
}

Tensor Tensor::contiguous(MemoryFormat format) const {
  detail::check_defined("contiguous", *this);
  if (is_contiguous(format)) return *this;
  Tensor out = Tensor::empty(sizes(), options(), format);
  Shape iteration = sizes();
  ops::StridedRef dst = detail::out_ref(out);
  ops::ConstStridedRef src = detail::in_ref(*this);
  detail::coalesce_elementwise(iteration, dst, {&src});
  ops::copy(detail::context_for(out), iteration, dtype(), dst, dtype(), src);
  if (autograd::any_requires_grad({*this})) {
    // A layout change: the gradient passes through in whatever layout it comes.
    autograd::record("contiguous", {*this}, {out}, [](const autograd::TensorList& g) { return g; });
  }
  return out;
}

Tensor Tensor::to(MemoryFormat format) const {
  detail::check_defined("to", *this);
  // PyTorch's rule: an alias when the tensor already suggests the format (and is dense in it).
  // Not contiguous(format): a contiguous [OC,C,1,1] weight is channels-last-contiguous too, but
  // to(ChannelsLast) gives it channels-last strides, so that it then suggests ChannelsLast.
  if (suggest_memory_format() == format && is_contiguous(format)) return *this;
  Tensor out = Tensor::empty(sizes(), options(), format);
  {
    NoGradGuard no_grad;
    out.copy_(*this);
  }
  if (autograd::any_requires_grad({*this})) {
    autograd::record("to_memory_format", {*this}, {out}, [](const autograd::TensorList& g) { return g; });
  }
  return out;
}

Tensor Tensor::empty(Shape sizes, TensorOptions options, MemoryFormat format) {
  if (format == MemoryFormat::Contiguous) return empty(std::move(sizes), options);
  Shape strides = detail::format_strides(sizes, format);
  return empty_strided(std::move(sizes), std::move(strides), options);
}

Tensor empty(Shape sizes, TensorOptions options, MemoryFormat format) {
  return Tensor::empty(std::move(sizes), options, format);
}

}  // namespace sublet
