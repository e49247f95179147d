#include "runtime/autograd/function.h"

#include <atomic>

#include "core/errors.h"
#include "runtime/kernel_args.h"

namespace sublet::autograd {

bool any_requires_grad(const TensorList& inputs) {
  if (!grad_mode_enabled()) return false;
  for (const auto& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

std::shared_ptr<Node> record(std::string name, const TensorList& inputs, const TensorList& outputs,
                             BackwardFn backward) {
  if (!any_requires_grad(inputs)) return nullptr;
  static std::atomic<std::uint64_t> next_sequence_nr{0};
  auto node = std::make_shared<Node>(std::move(name), next_sequence_nr++);
  node->backward_ = std::move(backward);
  node->next_edges_.reserve(inputs.size());
  for (const auto& input : inputs) {
    Edge edge;
    TensorMeta meta;
    if (input.defined()) {
      meta = {input.sizes(), input.dtype(), input.device()};
      if (input.requires_grad()) {
        if (input.grad_fn()) {
          edge.node = input.grad_fn();
          edge.input_nr = input.output_nr();
        } else {
          edge.leaf = input.impl_ptr();
        }
      }
    }
    node->next_edges_.push_back(std::move(edge));
    node->input_meta_.push_back(std::move(meta));
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    if (!out.defined()) throw ValueError("autograd::record(" + node->name() + "): output " + std::to_string(i) + " is undefined");
    for (const auto& input : inputs) {
      if (input.is_same(out)) {
        throw ValueError("autograd::record(" + node->name() + "): output " + std::to_string(i) +
                         " is one of the inputs; return a new tensor or an alias (input.detach())");
      }
    }
    node->output_meta_.push_back({out.sizes(), out.dtype(), out.device()});
    if (out.dtype() == DType::Int64) continue;  // indices are not differentiable
    out.unsafe_impl()->grad_fn = node;
    out.unsafe_impl()->output_nr = static_cast<std::uint32_t>(i);
  }
  return node;
}

std::shared_ptr<Node> record(std::string name, const TensorList& inputs, const TensorList& outputs,
                             ContextBackwardFn backward) {
  std::shared_ptr<Node> node = record(std::move(name), inputs, outputs, BackwardFn());
  if (node) node->backward_with_context_ = std::move(backward);
  return node;
}

Tensor save(const Tensor& tensor) {
  if (!tensor.defined()) return {};
  if (tensor.storage().category() == memory::BlockCategory::Unknown) {
    tensor.storage().set_category(memory::BlockCategory::Activation);
  }
  Tensor alias = tensor.detach();
  alias.unsafe_impl()->saved_version = tensor.storage().version();
  return alias;
}

TensorList hook_point(std::string name, const TensorList& tensors, std::function<void(const TensorList&)> hook) {
  if (!any_requires_grad(tensors)) return tensors;
  // Only tensors that require grad go through the node; the others pass through untouched (an
  // alias with a grad_fn would make everything downstream of them record for nothing).
  TensorList result = tensors;
  TensorList tracked_inputs, aliases;
  std::vector<std::size_t> positions;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined()) throw ValueError("hook_point(" + name + "): got an undefined tensor");
    if (!t.requires_grad()) continue;
    result[i] = detail::make_view(t, t.sizes(), t.strides(), t.storage_offset());
    tracked_inputs.push_back(t);
    aliases.push_back(result[i]);
    positions.push_back(i);
  }
  record(std::move(name), tracked_inputs, aliases,
         [hook = std::move(hook), positions, count = tensors.size()](const TensorList& grads) {
           TensorList all(count);
           for (std::size_t k = 0; k < positions.size(); ++k) all[positions[k]] = grads[k];
           hook(all);
           return grads;
         });
  return result;
}

}  // namespace sublet::autograd
