#pragma once
// What the backward engine tells whoever watches it, and nothing about what they do with it:
// data parallel starts an all-reduce when a bucket's gradients are in; the step scheduler
// (runtime/step/scheduler.h) places a node's passes on streams, joins the streams that wrote a
// gradient before anything reads it and starts optimizer updates. Autograd knows these hooks, not the schedules behind them.
//
// An observer is installed for a guard's scope on the calling thread (the thread that runs
// backward). Every installed observer hears every event, in the order they were installed;
// guards may end in any order (each removes its own observer).
#include <vector>

#include "runtime/autograd/backward_context.h"
#include "runtime/tensor.h"

namespace sublet::autograd {

class Node;

class BackwardObserver {
 public:
  virtual ~BackwardObserver() = default;
  // Before a node's backward runs.
  virtual void node_starting(const Node& node) { (void)node; }
  // Before the engine launches work on a leaf's gradient: adding into an existing .grad, a
  // cast to the leaf's dtype, a copy to the leaf's layout. A gradient stored as it is (the
  // first one, fresh, in the leaf's layout) is not touched and is not reported.
  virtual void about_to_touch_leaf_gradient(const TensorImpl& leaf) { (void)leaf; }
  // Once per backward for every leaf that received a gradient, after the last of its
  // contributions is in .grad (PyTorch's post-accumulate-grad hooks; a leaf reached through
  // several edges is reported once, after all of them).
  virtual void leaf_gradient_final(const TensorImpl& leaf) { (void)leaf; }
  // When a backward ends, on the way out of an exception too (then an exception thrown here is
  // dropped: the first one goes on).
  virtual void backward_finished() {}
  // A node's independent passes (BackwardContext::run_passes): true when this observer ran them;
  // false leaves them to the observer installed before it, and after the first to run_in_order.
  virtual bool place_passes(const ops::Context& ctx, BackwardPasses& passes) {
    (void)ctx, (void)passes;
    return false;
  }
};

// The observers installed on this thread, in installation order.
const std::vector<BackwardObserver*>& backward_observers();

class BackwardObserverGuard {
 public:
  explicit BackwardObserverGuard(BackwardObserver& observer);
  ~BackwardObserverGuard();
  BackwardObserverGuard(const BackwardObserverGuard&) = delete;
  BackwardObserverGuard& operator=(const BackwardObserverGuard&) = delete;

 private:
  BackwardObserver* observer_;
};

}  // namespace sublet::autograd
