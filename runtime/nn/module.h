#pragma once
// nn::Module, after LibTorch's: named parameters, buffers and children registered by the
// subclass's constructor; dotted names ("layer1.0.conv1.weight") for state dicts; train()/eval();
// forward and backward hooks, on which the per-layer memory study is built.
//
//   class Mlp : public nn::Module {
//    public:
//     Mlp() : Module("Mlp") {
//       fc1 = register_module("fc1", std::make_shared<nn::Linear>(784, 128));
//       fc2 = register_module("fc2", std::make_shared<nn::Linear>(128, 10));
//     }
//     Tensor forward(const Tensor& x) override { return (*fc2)((*fc1)(x).relu()); }
//     std::shared_ptr<nn::Linear> fc1, fc2;
//   };
//
// Call modules through operator() (not forward) so that hooks run.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace sublet {
class Generator;
}  // namespace sublet

namespace sublet::nn {

class Module {
 public:
  using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
  using ForwardPreHook = std::function<void(Module& module, const Tensor& input)>;
  using ForwardHook = std::function<void(Module& module, const Tensor& input, const Tensor& output)>;
  // Gradient of the module's output, before the module's own backward runs.
  using BackwardPreHook = std::function<void(Module& module, const Tensor& grad_output)>;
  // After the module's backward: the gradient reaching its input (undefined when the input does
  // not require grad; the hook then fires together with the pre-hook's moment, as in PyTorch).
  using BackwardHook = std::function<void(Module& module, const Tensor& grad_input, const Tensor& grad_output)>;
  using HookId = std::uint64_t;

  explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Subclasses implement this; callers use operator().
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input);

  const std::string& type_name() const { return type_name_; }

  // Registration (from constructors). Parameters become leaves that require grad (unless told
  // otherwise) and their storage is tagged Parameter. Names must be new and contain no '.'.
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor tensor);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // Registration order; recurse = include children's, with dotted prefixes.
  NamedTensors named_parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  // The random generators this module and its children draw from (dropout's), so that
  // nn::checkpoint can replay a forward's draws; a module that draws overrides own_generators().
  std::vector<Generator*> generators() const;
  virtual std::vector<Generator*> own_generators() const { return {}; }
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  // This module as "" and every descendant by dotted path, depth first.
  std::vector<std::pair<std::string, Module*>> named_modules();
  // This module's own parameter or buffer by name (ValueError if none).
  Tensor& parameter(const std::string& name);
  Tensor& buffer(const std::string& name);

  // Parameters then buffers by dotted name: what a checkpoint stores. Live tensors, not copies.
  NamedTensors state_dict() const;
  // Copies values into the registered tensors (cast to their dtype), under NoGradGuard. strict:
  // the names must match exactly both ways. Errors name the entry: ShapeError for a shape
  // mismatch, ValueError for missing or unexpected names.
  void load_state_dict(const NamedTensors& state, bool strict = true);

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Drops every parameter's gradient (set_to_none, as PyTorch's default): frees its memory.
  void zero_grad();
  // Moves or converts parameters and buffers in place: Tensor handles held elsewhere (an
  // optimizer's) see the change. Gradients are dropped.
  void to(Device device);
  void to(DType dtype);
  // Every 4-D parameter and buffer into the memory format with Tensor::to(MemoryFormat)
  // (PyTorch's model.to(memory_format=torch.channels_last)), in place as above; others are left alone.
  void to(MemoryFormat format);

  HookId register_forward_pre_hook(ForwardPreHook hook);
  HookId register_forward_hook(ForwardHook hook);
  HookId register_backward_pre_hook(BackwardPreHook hook);
  HookId register_backward_hook(BackwardHook hook);
  void remove_hook(HookId id);

 protected:
  // Runs `body` as this module's forward with every hook operator() runs: for a module's other
  // entry points (BatchNorm2d::forward_relu) that callers use in place of operator().
  Tensor call_with_hooks(const Tensor& input, const std::function<Tensor(const Tensor&)>& body);

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name) const;
  void collect(bool parameters, bool recurse, const std::string& prefix, NamedTensors& out) const;
  void collect_modules(const std::string& prefix, std::vector<std::pair<std::string, Module*>>& out);
  void replace_all(const std::function<Tensor(const Tensor&)>& convert);

  std::string type_name_;
  NamedTensors parameters_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  // Backward-hook nodes can outlive the module (a graph kept after the model is gone); they hold
  // a weak reference to this token and skip the hooks once it has expired.
  std::shared_ptr<Module*> self_ = std::make_shared<Module*>(this);
  HookId next_hook_id_ = 1;
  std::map<HookId, ForwardPreHook> forward_pre_hooks_;
  std::map<HookId, ForwardHook> forward_hooks_;
  std::map<HookId, BackwardPreHook> backward_pre_hooks_;
  std::map<HookId, BackwardHook> backward_hooks_;
};

}  // namespace sublet::nn
