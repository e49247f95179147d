#pragma once
// What a Tensor handle points to. Views are separate TensorImpls sharing one Storage.
#include <cstdint>
#include <memory>

#include "ops/dtype.h"
#include "runtime/shape.h"
#include "runtime/storage.h"

namespace sublet {

namespace autograd {
class Node;
}

struct TensorImpl {
  Storage storage;
  Shape sizes;
  Shape strides;             // in elements
  std::int64_t offset = 0;   // storage offset, in elements
  DType dtype = DType::Float32;

  // Autograd metadata. A leaf has requires_grad set and no grad_fn; a result of a recorded op
  // has grad_fn (and is output number output_nr of that node).
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;
  std::uint32_t output_nr = 0;

  // Set on the aliases autograd::save() makes: the storage version at saving time. Reading
  // such a tensor after an in-place change of its storage would give a wrong gradient, so
  // data() refuses.
  static constexpr std::uint64_t kNotSaved = ~std::uint64_t{0};
  std::uint64_t saved_version = kNotSaved;

  Device device() const { return storage.device(); }
  void* data() const {
    if (saved_version != kNotSaved && saved_version != storage.version()) throw_modified_since_saved();
    return static_cast<char*>(storage.data()) + offset * static_cast<std::int64_t>(element_size(dtype));
  }
  [[noreturn]] void throw_modified_since_saved() const;
};

}  // namespace sublet
