// clone, dtype and device conversions, fill_ and copy_.
#include "core/errors.h"
#include "ops/copy.h"
#include "runtime/autograd/function.h"
#include "runtime/kernel_args.h"

namespace sublet {

using autograd::TensorList;

namespace {
// One element-wise copy, coalesced (a dense layout such as channels-last becomes one flat run).
void copy_into(const Tensor& out, DType out_dtype, ops::ConstStridedRef src, DType src_dtype) {
  Shape sizes = out.sizes();
  ops::StridedRef dst = detail::out_ref(out);
  detail::coalesce_elementwise(sizes, dst, {&src});
  ops::copy(detail::context_for(out), sizes, out_dtype, dst, src_dtype, src);
}
}  // namespace

Tensor Tensor::clone() const {
  detail::check_defined("clone", *this);
  Tensor out = detail::empty_in_layout_of(*this, options());
  copy_into(out, dtype(), detail::in_ref(*this), dtype());
  if (autograd::any_requires_grad({*this})) {
    autograd::record("clone", {*this}, {out}, [](const TensorList& g) { return TensorList{g[0]}; });
  }
  return out;
}

Tensor Tensor::to(DType target) const {
  detail::check_defined("to", *this);
  if (target == dtype()) return *this;
  Tensor out = detail::empty_in_layout_of(*this, options().dtype(target));
  copy_into(out, target, detail::in_ref(*this), dtype());
  if (autograd::any_requires_grad({*this})) {
    autograd::record("to_dtype", {*this}, {out}, [source = dtype()](const TensorList& g) {
      return TensorList{g[0].to(source)};
    });
  }
  return out;
}

Tensor Tensor::to(Device target) const {
  detail::check_defined("to", *this);
  if (target == device()) return *this;
  // A dense layout (channels-last, a transpose) moves as its bytes and keeps its strides.
  const bool dense = is_non_overlapping_and_dense();
  Tensor source = dense ? *this : contiguous();
  Tensor out = dense ? Tensor::empty_strided(sizes(), strides(), options().device(target))
                     : Tensor::empty(sizes(), options().device(target));  // DeviceError when not available
  ops::copy_bytes(target, out.data_ptr(), device(), source.data_ptr(), nbytes());
  if (autograd::any_requires_grad({*this})) {
    autograd::record("to_device", {*this}, {out}, [origin = device()](const TensorList& g) {
      return TensorList{g[0].to(origin)};
    });
  }
  return out;
}

Tensor& Tensor::fill_(double value) {
  detail::check_defined("fill_", *this);
  detail::begin_inplace("fill_", *this);
  Shape iteration = sizes();
  ops::StridedRef out = detail::out_ref(*this);
  detail::coalesce_elementwise(iteration, out, {});
  ops::fill(detail::context_for(*this), dtype(), iteration, out, value);
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  detail::check_defined("copy_", *this);
  detail::check_defined("copy_", src);
  detail::begin_inplace("copy_", *this, &src);
  const Tensor local = src.device() == device() ? src : src.to(device());
  copy_into(*this, dtype(), detail::in_ref("copy_", local, sizes()), local.dtype());
  return *this;
}

}  // namespace sublet
