#include "runtime/nn/checkpoint.h"

#include <random>
#include <utility>
#include <vector>

#include "runtime/autocast.h"
#include "runtime/autograd/function.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/generator.h"

namespace sublet::nn {
namespace {

using GeneratorStates = std::vector<std::pair<Generator*, std::mt19937_64>>;

GeneratorStates states_of(const Module& module) {
  GeneratorStates states;
  for (Generator* g : module.generators()) states.emplace_back(g, g->engine());
  return states;
}

void restore(const GeneratorStates& states) {
  for (const auto& [generator, state] : states) generator->engine() = state;
}

}  // namespace

Tensor checkpoint(const std::shared_ptr<Module>& module, const Tensor& input) {
  autograd::TensorList inputs{input};
  // The parameters are inputs of the node too, so that it is recorded even when the input needs
  // no gradient (the first block of a network); their gradients come from the recomputation.
  for (const Tensor& p : module->parameters()) inputs.push_back(p);
  if (!autograd::any_requires_grad(inputs)) return (*module)(input);

  GeneratorStates at_forward = states_of(*module);
  Tensor output;
  {
    NoGradGuard no_grad;  // nothing inside is saved for backward
    output = (*module)(input);
  }
  const bool input_needs_grad = input.requires_grad();
  const std::size_t inputs_count = inputs.size();
  autograd::record(
      "checkpoint(" + module->type_name() + ")", inputs, {output},
      [module, saved = autograd::save(input), at_forward = std::move(at_forward), input_needs_grad,
       inputs_count, autocast_on = amp::autocast_is_enabled(),
       autocast_dtype = amp::autocast_dtype()](autograd::TensorList& grads) {
        const GeneratorStates now = states_of(*module);
        std::vector<Tensor> buffers = module->buffers();
        std::vector<Tensor> kept;
        for (const Tensor& b : buffers) kept.push_back(b.clone());
        // The input's gradient is caught by an identity node, not accumulated into a leaf: the
        // engine sums the contributions (the residual's, conv1's) in its buffer as it does for
        // the plain module, where a leaf would copy the first one, which the node that produced
        // it still holds (one activation more at the recomputed block's peak).
        auto input_grad = std::make_shared<Tensor>();
        Tensor y;
        restore(at_forward);
        {
          GradModeGuard grad_on(true);  // backward closures run with grad mode off
          Tensor x = saved.detach();
          if (input_needs_grad) {
            Tensor leaf = x;
            leaf.requires_grad_(true);
            x = leaf.detach();
            autograd::record("checkpoint_input", {leaf}, {x}, [input_grad](const autograd::TensorList& g) {
              *input_grad = g[0];
              return autograd::TensorList{Tensor()};
            });
          }
          AutocastGuard autocast(autocast_dtype, autocast_on);  // recompute in the forward's dtypes
          y = (*module)(x);
        }
        restore(now);
        for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(kept[i]);
        // The recomputed output and the incoming gradient are handed over, so each goes as soon
        // as the recomputed graph is done with it, not when this closure returns (a braced list
        // would keep copies until the call returns). Accumulates into the parameters' .grad.
        autograd::TensorList roots, root_grads;
        roots.push_back(std::move(y));
        root_grads.push_back(std::move(grads[0]));
        autograd::backward_releasing(std::move(roots), std::move(root_grads));
        autograd::TensorList out(inputs_count);
        if (input_needs_grad && input_grad->defined())
          out[0] = input_grad->dtype() == saved.dtype() ? std::move(*input_grad) : input_grad->to(saved.dtype());
        return out;
      });
  return output;
}

Checkpoint::Checkpoint(std::shared_ptr<Module> inner) : Module("Checkpoint"), inner_(std::move(inner)) {
  register_module("module", inner_);
}

Tensor Checkpoint::forward(const Tensor& input) { return checkpoint(inner_, input); }

}  // namespace sublet::nn
