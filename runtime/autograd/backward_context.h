#pragma once
// What a node's backward may ask the engine while it runs (the second argument of a backward
// recorded with autograd::record's context form, runtime/autograd/function.h).
#include <cstddef>

#include "runtime/tensor.h"

namespace sublet::autograd {

using TensorList = std::vector<Tensor>;

class BackwardContext {
 public:
  // The gradient already collected for the tensor that the node's input `input` came from, when
  // the node may add its own gradient for that input into it in place instead of returning a
  // new tensor for the engine to add (a residual block's input gets the shortcut's gradient
  // first and the first convolution's after: cuDNN and cuBLAS fold the sum into the
  // convolution's input gradient, beta = 1, which saves the add's kernel and a buffer). The
  // node that does so returns this very tensor as its gradient for `input`, and the engine adds
  // nothing more. Undefined when there is none, or when the engine's buffer is shared, or of
  // another dtype, device or shape than the input, or not dense; the node checks any layout it
  // needs beyond that.
  Tensor gradient_sum_target(std::size_t input) const {
    return sum_targets_ != nullptr && input < sum_targets_->size() ? (*sum_targets_)[input] : Tensor();
  }

 private:
  friend class Engine;
  explicit BackwardContext(const TensorList* sum_targets) : sum_targets_(sum_targets) {}

  const TensorList* sum_targets_;  // the engine's, one per input (undefined: none offered)
};

}  // namespace sublet::autograd
