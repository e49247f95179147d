#pragma once
// What a node's backward may ask the engine while it runs (the second argument of a backward
// recorded with autograd::record's context form, runtime/autograd/function.h): the gradient it
// may add into, and where its independent passes run.
#include <cstddef>
#include <functional>
#include <vector>

#include "ops/context.h"
#include "runtime/tensor.h"

namespace sublet::autograd {

using TensorList = std::vector<Tensor>;

// Device work that enqueues only on the context it is given.
using StreamWork = std::function<void(const ops::Context&)>;

// A backward's passes that do not depend on each other (a convolution's input and weight
// gradients). The layer describes them; whoever places them (the step scheduler in a captured
// step, runtime/step/scheduler.h) runs them one after the other, side by side, or with `side`
// left running past the node. Either may be empty (nothing to do).
struct BackwardPasses {
  StreamWork main;  // what the rest of backward reads next (the input gradient)
  StreamWork side;  // the other pass (the weight and bias gradients)
  // What `side` reads or writes: kept alive until it is joined, should it run on past the node.
  std::vector<Tensor> keep;
  // Everything `side` writes is a gradient the engine stores into a leaf (a parameter's): only
  // then may it run on past the node (the engine announces any work on a leaf's gradient).
  bool side_writes_only_leaves = false;
};

// main, then side, on ctx.stream: the placement when nobody else places them.
void run_in_order(const ops::Context& ctx, const BackwardPasses& passes);

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
  // Runs the passes where the latest installed BackwardObserver that places passes puts them
  // (BackwardObserver::place_passes); in order on ctx.stream when none does.
  void run_passes(const ops::Context& ctx, BackwardPasses passes) const;

 private:
  friend class Engine;
  explicit BackwardContext(const TensorList* sum_targets) : sum_targets_(sum_targets) {}

  const TensorList* sum_targets_;  // the engine's, one per input (undefined: none offered)
};

}  // namespace sublet::autograd
