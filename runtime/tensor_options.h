#pragma once
// LibTorch-style options with chained setters:
//   zeros({2, 3}, TensorOptions().dtype(DType::Float64).requires_grad(true))
// A DType or a Device converts to options implicitly: zeros({2, 3}, DType::Int64).
#include <optional>

#include "core/device.h"
#include "core/dtype.h"

namespace sublet {

class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(DType dtype) : dtype_(dtype) {}     // NOLINT(google-explicit-constructor): as LibTorch
  TensorOptions(Device device) : device_(device) {}  // NOLINT(google-explicit-constructor)

  TensorOptions dtype(DType dtype) const { auto o = *this; o.dtype_ = dtype; return o; }
  TensorOptions device(Device device) const { auto o = *this; o.device_ = device; return o; }
  TensorOptions requires_grad(bool requires_grad) const { auto o = *this; o.requires_grad_ = requires_grad; return o; }

  // Float32 unless set (from_vector uses its element type instead).
  DType dtype() const { return dtype_.value_or(DType::Float32); }
  bool has_dtype() const { return dtype_.has_value(); }
  Device device() const { return device_; }
  bool requires_grad() const { return requires_grad_; }

 private:
  std::optional<DType> dtype_;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;
};

}  // namespace sublet
