#include "runtime/nn/module.h"

#include <algorithm>

#include "core/errors.h"
#include "runtime/allocation_scope.h"
#include "runtime/autograd/function.h"
#include "runtime/autograd/grad_mode.h"

namespace sublet::nn {

Tensor Module::forward(const Tensor&) {
  throw Error(type_name_ + ": forward(const Tensor&) is not implemented");
}

Tensor Module::operator()(const Tensor& input) {
  return call_with_hooks(input, [this](const Tensor& x) { return forward(x); });
}

Tensor Module::call_with_hooks(const Tensor& input, const std::function<Tensor(const Tensor&)>& body) {
  for (auto& [id, hook] : forward_pre_hooks_) hook(*this, input);
  Tensor x = input;
  // Backward hooks ride on identity nodes around the module: one on its input fires when the
  // module's backward is done, one on its output fires when it is about to start.
  const bool backward_hooks = (!backward_pre_hooks_.empty() || !backward_hooks_.empty()) &&
                              autograd::grad_mode_enabled();
  auto grad_output = std::make_shared<Tensor>();
  const bool input_tracked = backward_hooks && input.requires_grad();
  const std::weak_ptr<Module*> self = self_;
  if (input_tracked) {
    x = autograd::hook_point(type_name_ + ".backward_hook", {input}, [self, grad_output](const autograd::TensorList& g) {
      const auto alive = self.lock();
      if (!alive) return;
      Module& module = **alive;
      for (auto& [id, hook] : module.backward_hooks_) hook(module, g[0], *grad_output);
      *grad_output = Tensor();
    })[0];
  }
  Tensor output = body(x);
  if (backward_hooks && output.requires_grad()) {
    output = autograd::hook_point(type_name_ + ".backward_pre_hook", {output},
                                  [self, grad_output, input_tracked](const autograd::TensorList& g) {
                                    const auto alive = self.lock();
                                    if (!alive) return;
                                    Module& module = **alive;
                                    for (auto& [id, hook] : module.backward_pre_hooks_) hook(module, g[0]);
                                    if (input_tracked) {
                                      *grad_output = g[0];
                                    } else {
                                      for (auto& [id, hook] : module.backward_hooks_) hook(module, Tensor(), g[0]);
                                    }
                                  })[0];
  }
  for (auto& [id, hook] : forward_hooks_) hook(*this, input, output);
  return output;
}

void Module::check_new_name(const std::string& name) const {
  if (name.empty() || name.find('.') != std::string::npos) {
    throw ValueError(type_name_ + ": name '" + name + "' must be non-empty and contain no '.'");
  }
  auto taken = [&](const auto& list) {
    for (const auto& entry : list) if (entry.first == name) return true;
    return false;
  };
  if (taken(parameters_) || taken(buffers_) || taken(children_)) {
    throw ValueError(type_name_ + ": name '" + name + "' is already registered");
  }
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name);
  if (!tensor.defined()) throw ValueError(type_name_ + ": parameter '" + name + "' is undefined");
  if (!tensor.is_leaf()) tensor = tensor.detach();
  tensor.requires_grad_(requires_grad);
  tensor.storage().set_category(memory::BlockCategory::Parameter);
  parameters_.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor) {
  check_new_name(name);
  buffers_.emplace_back(name, tensor);
  return tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  if (!module) throw ValueError(type_name_ + ": submodule '" + name + "' is null");
  children_.emplace_back(name, std::move(module));
}

void Module::collect(bool parameters, bool recurse, const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, tensor] : parameters ? parameters_ : buffers_) out.emplace_back(prefix + name, tensor);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect(parameters, true, prefix + name + ".", out);
}

Module::NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect(true, recurse, "", out);
  return out;
}

Module::NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect(false, recurse, "", out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

void Module::collect_modules(const std::string& prefix, std::vector<std::pair<std::string, Module*>>& out) {
  out.emplace_back(prefix, this);
  for (auto& [name, child] : children_) child->collect_modules(prefix.empty() ? name : prefix + "." + name, out);
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  collect_modules("", out);
  return out;
}

Tensor& Module::parameter(const std::string& name) {
  for (auto& [n, t] : parameters_) if (n == name) return t;
  throw ValueError(type_name_ + ": no parameter named '" + name + "'");
}

Tensor& Module::buffer(const std::string& name) {
  for (auto& [n, t] : buffers_) if (n == name) return t;
  throw ValueError(type_name_ + ": no buffer named '" + name + "'");
}

Module::NamedTensors Module::state_dict() const {
  NamedTensors out = named_parameters();
  for (auto& entry : named_buffers()) out.push_back(std::move(entry));
  return out;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  NoGradGuard no_grad;
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, tensor] : state) given[name] = &tensor;
  std::string missing;
  for (auto& [name, target] : state_dict()) {
    const auto it = given.find(name);
    if (it == given.end()) {
      missing += (missing.empty() ? "" : ", ") + name;
      continue;
    }
    const Tensor& source = *it->second;
    if (source.sizes() != target.sizes()) {
      throw ShapeError("load_state_dict: '" + name + "' has shape " + shape_str(source.sizes()) +
                       " in the state, " + shape_str(target.sizes()) + " in the " + type_name_);
    }
    target.copy_(source);
    given.erase(it);
  }
  if (strict && (!missing.empty() || !given.empty())) {
    std::string unexpected;
    for (const auto& [name, tensor] : given) unexpected += (unexpected.empty() ? "" : ", ") + name;
    throw ValueError("load_state_dict into " + type_name_ + ": missing [" + missing + "], unexpected [" +
                     unexpected + "]");
  }
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (auto& t : parameters()) t.set_grad(Tensor());
}

void Module::replace_all(const std::function<Tensor(const Tensor&)>& convert) {
  NoGradGuard no_grad;
  auto replace = [&](Tensor& t, memory::BlockCategory category) {
    Tensor moved = convert(t);
    if (moved.is_same(t)) return;
    moved.storage().set_category(category);
    TensorImpl* impl = t.unsafe_impl();
    // Swap the data under the existing handle so that every holder sees the new tensor.
    impl->storage = moved.storage();
    impl->sizes = moved.sizes();
    impl->strides = moved.strides();
    impl->offset = moved.storage_offset();
    impl->dtype = moved.dtype();
    impl->grad.reset();
  };
  for (auto& [name, t] : parameters_) replace(t, memory::BlockCategory::Parameter);
  for (auto& [name, t] : buffers_) replace(t, t.storage().category());
  for (auto& [name, child] : children_) child->replace_all(convert);
}

void Module::to(Device device) {
  replace_all([device](const Tensor& t) { return t.to(device); });
}

void Module::to(MemoryFormat format) {
  replace_all([format](const Tensor& t) { return t.dim() == 4 ? t.to(format) : t; });
}

void Module::to(DType dtype) {
  replace_all([dtype](const Tensor& t) { return t.dtype() == DType::Int64 ? t : t.to(dtype); });
}

Module::HookId Module::register_forward_pre_hook(ForwardPreHook hook) {
  forward_pre_hooks_.emplace(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}
Module::HookId Module::register_forward_hook(ForwardHook hook) {
  forward_hooks_.emplace(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}
Module::HookId Module::register_backward_pre_hook(BackwardPreHook hook) {
  backward_pre_hooks_.emplace(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}
Module::HookId Module::register_backward_hook(BackwardHook hook) {
  backward_hooks_.emplace(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

void Module::remove_hook(HookId id) {
  forward_pre_hooks_.erase(id);
  forward_hooks_.erase(id);
  backward_pre_hooks_.erase(id);
  backward_hooks_.erase(id);
}

std::vector<Generator*> Module::generators() const {
  std::vector<Generator*> all = own_generators();
  for (const auto& [name, child] : children_)
    for (Generator* g : child->generators())
      if (std::find(all.begin(), all.end(), g) == all.end()) all.push_back(g);
  return all;
}

}  // namespace sublet::nn
