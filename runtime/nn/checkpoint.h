#pragma once
// Recomputation (activation checkpointing), as torch.utils.checkpoint: nn::checkpoint(module, x)
// runs the module's forward without keeping the activations its backward would need, and
// during backward runs that forward again (with autograd on) and backpropagates through it. The
// memory of the module's inner activations is traded for one more forward.
//  - Random draws repeat: the generators the module draws from (Module::generators(), dropout's)
//    are set back to their state at the forward for the recomputation, so dropout drops the same
//    elements, and left where they were afterwards.
//  - Buffers are not updated twice: batch norm's running statistics are kept as the forward left
//    them (PyTorch updates them again in the recomputation).
//  - Gradients are those of the plain module, bit for bit on the CPU.
// Outside autograd (no grad mode, or nothing requiring grad) it is the plain forward.
#include <memory>

#include "runtime/nn/module.h"

namespace sublet::nn {

Tensor checkpoint(const std::shared_ptr<Module>& module, const Tensor& input);

// A module whose forward is checkpoint(inner, x): wrap a block to recompute it in backward.
// Its parameters and state dict are the inner module's, under the name "module".
class Checkpoint : public Module {
 public:
  explicit Checkpoint(std::shared_ptr<Module> inner);
  Tensor forward(const Tensor& input) override;
  const std::shared_ptr<Module>& inner() const { return inner_; }

 private:
  std::shared_ptr<Module> inner_;
};

}  // namespace sublet::nn
