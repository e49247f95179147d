// clone, dtype and device conversions, fill_ and copy_.
#include "core/errors.h"
#include "ops/copy.h"
#include "runtime/autograd/function.h"
#include "runtime/kernel_args.h"

namespace sublet {

using autograd::TensorList;

Tensor Tensor::clone() const {
  detail::check_defined("clone", *this);
  Tensor out = Tensor::empty(sizes(), options());
  ops::copy(detail::context_for(out), sizes(), dtype(), detail::out_ref(out), dtype(), detail::in_ref(*this));
  if (autograd::any_requires_grad({*this})) {
    autograd::record("clone", {*this}, {out}, [](const TensorList& g) { return TensorList{g[0]}; });
  }
  return out;
}

Tensor Tensor::to(DType target) const {
  detail::check_defined("to", *this);
  if (target == dtype()) return *this;
  Tensor out = Tensor::empty(sizes(), options().dtype(target));
  ops::copy(detail::context_for(out), sizes(), target, detail::out_ref(out), dtype(), detail::in_ref(*this));
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
  Tensor source = contiguous();
  Tensor out = Tensor::empty(sizes(), options().device(target));  // DeviceError when not available
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
  ops::fill(detail::context_for(*this), dtype(), sizes(), detail::out_ref(*this), value);
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  detail::check_defined("copy_", *this);
  detail::check_defined("copy_", src);
  detail::begin_inplace("copy_", *this, &src);
  const Tensor local = src.device() == device() ? src : src.to(device());
  ops::copy(detail::context_for(*this), sizes(), dtype(), detail::out_ref(*this), local.dtype(),
            detail::in_ref("copy_", local, sizes()));
  return *this;
}

}  // namespace sublet
