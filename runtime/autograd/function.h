#pragma once
// Defining a differentiable op: forward and backward side by side.
//
// 1. If the forward is built from differentiable Tensor ops, nothing is needed: each of those
//    ops records itself. Use record() when the forward calls a kernel directly (ops::conv2d...)
//    or when one node is cheaper than the composition.
// 2. Compute the outputs without recording (kernels on Tensor::empty outputs record nothing; if
//    you call Tensor ops, do it under NoGradGuard). Then attach one node:
//
//    Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias) {
//      Tensor out = ...;                                  // forward, e.g. ops::conv2d_forward
//      if (autograd::any_requires_grad({input, weight, bias})) {
//        autograd::record("conv2d", {input, weight, bias}, {out},
//            [x = autograd::save(input), w = autograd::save(weight), has_bias = bias.defined()]
//            (const autograd::TensorList& grads) {
//              const Tensor& grad_out = grads[0];
//              Tensor grad_x = ..., grad_w = ..., grad_b = has_bias ? ... : Tensor();
//              return autograd::TensorList{grad_x, grad_w, grad_b};   // one per input
//            });
//      }
//      return out;
//    }
//
// Rules:
//  - backward returns one Tensor per input, in order; an undefined Tensor means "no gradient"
//    (fine for inputs that are undefined or do not require grad). Each defined gradient must
//    have its input's shape (checked; ShapeError names the op).
//  - grad_outputs has one defined tensor per output, shaped like it (zeros if nothing flowed).
//    int64 outputs (indices) are not differentiable and get no grad_fn.
//  - Capture saved tensors through autograd::save(t): a detached alias (same storage, no graph)
//    so that saving an output does not create a reference cycle. Capture nothing else big: the
//    closure is destroyed right after it runs (unless retain_graph), which is what frees the
//    activation memory during backward.
//  - To skip work for inputs that need no gradient, capture input.requires_grad() as a bool.
//  - backward runs with grad mode off: Tensor ops inside it record nothing.
#include <memory>
#include <string>

#include "runtime/autograd/grad_mode.h"
#include "runtime/autograd/node.h"

namespace sublet::autograd {

// Grad mode is on and at least one (defined) input requires grad.
bool any_requires_grad(const TensorList& inputs);

// Attaches a node computing `backward` to `outputs` (setting their grad_fn) when
// any_requires_grad(inputs); returns it, or nullptr when nothing was recorded.
std::shared_ptr<Node> record(std::string name, const TensorList& inputs, const TensorList& outputs,
                             BackwardFn backward);
// The same for a backward that takes the engine's BackwardContext as its second argument (a
// convolution asks it for the gradient to add into, runtime/autograd/backward_context.h).
std::shared_ptr<Node> record(std::string name, const TensorList& inputs, const TensorList& outputs,
                             ContextBackwardFn backward);

// A detached alias for capturing in a backward closure. Storage still tagged Unknown is
// re-tagged Activation, so snapshots show what backward is holding on to. The alias remembers
// the storage version: reading it after an in-place change (an optimizer step between forward
// and backward, say) throws instead of producing a wrong gradient.
Tensor save(const Tensor& tensor);

// Returns aliases of `tensors` whose gradients pass through a node that calls `hook(grads)`
// and forwards them unchanged. grads has one entry per tensor: zeros where nothing flowed,
// undefined for tensors that do not require grad (those are returned as they are). Wrapping a
// module's outputs gives a "backward of this module starts" signal; wrapping its inputs gives
// "backward of this module done".
TensorList hook_point(std::string name, const TensorList& tensors, std::function<void(const TensorList&)> hook);

// Runs backward from several roots at once (Tensor::backward is the one-root form). grads[i]
// may be undefined for a one-element root (ones).
void backward(const TensorList& roots, const TensorList& grads = {}, bool retain_graph = false);
// The same, taking the roots and their gradients over: the engine drops its references once the
// graph has been walked from them, so a root's memory goes as soon as the nodes that saved it
// have run and a gradient's once the first node has consumed it, instead of living as long as
// the caller's handles (nn::checkpoint's recomputed output and incoming gradient: one
// activation each, alive through the whole recomputed backward otherwise).
void backward_releasing(TensorList&& roots, TensorList&& grads, bool retain_graph = false);

}  // namespace sublet::autograd
