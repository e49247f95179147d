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

  Device device() const { return storage.device(); }
  void* data() const {
    return static_cast<char*>(storage.data()) + offset * static_cast<std::int64_t>(element_size(dtype));
  }
};

}  // namespace sublet
