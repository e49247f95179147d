#include "runtime/optim/optimizer.h"

#include <cctype>

#include "memory/errors.h"
#include "runtime/allocation_scope.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"

namespace sublet::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr)
    : params_(std::move(params)), lr_(lr), param_steps_(params_.size(), 0), state_(params_.size()) {
  if (!(lr >= 0.0)) throw ValueError("optimizer: learning rate must be >= 0, got " + std::to_string(lr));
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].defined() || !params_[i].is_leaf() || !params_[i].requires_grad()) {
      throw ValueError("optimizer: parameter " + std::to_string(i) + " must be a leaf tensor that requires grad, got " +
                       params_[i].to_string());
    }
  }
}

void Optimizer::step() {
  NoGradGuard no_grad;
  AllocationCategoryGuard temporaries(memory::BlockCategory::Temporary);
  ++step_count_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor grad = params_[i].grad();
    if (!grad.defined()) continue;
    ++param_steps_[i];
    update(i, params_[i], grad);
  }
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.set_grad(Tensor());
}

Tensor& Optimizer::state(std::size_t index, const std::string& key, bool* created) {
  Tensor& slot = state_.at(index)[key];
  if (created) *created = !slot.defined();
  if (!slot.defined()) {
    AllocationCategoryGuard category(memory::BlockCategory::OptimizerState);
    slot = zeros(params_[index].sizes(), params_[index].options());
  }
  return slot;
}

const Tensor* Optimizer::find_state(std::size_t index, const std::string& key) const {
  const auto& entries = state_.at(index);
  const auto it = entries.find(key);
  return it == entries.end() ? nullptr : &it->second;
}

Optimizer::NamedTensors Optimizer::state_dict() const {
  NamedTensors out;
  out.emplace_back("lr", full({}, lr_, DType::Float64));
  out.emplace_back("step_count", full({}, static_cast<double>(step_count_), DType::Int64));
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::string prefix = std::to_string(i) + ".";
    out.emplace_back(prefix + "step", full({}, static_cast<double>(param_steps_[i]), DType::Int64));
    for (const auto& [key, tensor] : state_[i]) out.emplace_back(prefix + key, tensor);
  }
  return out;
}

void Optimizer::load_state_dict(const NamedTensors& entries) {
  NoGradGuard no_grad;
  bool have_lr = false, have_count = false;
  for (const auto& [name, tensor] : entries) {
    if (name == "lr") {
      lr_ = tensor.item<double>();
      have_lr = true;
      continue;
    }
    if (name == "step_count") {
      step_count_ = tensor.item<std::int64_t>();
      have_count = true;
      continue;
    }
    const auto dot = name.find('.');
    std::size_t index = 0;
    bool numeric = dot != std::string::npos && dot > 0;
    for (std::size_t c = 0; numeric && c < dot; ++c) numeric = std::isdigit(static_cast<unsigned char>(name[c]));
    if (numeric) index = std::stoul(name.substr(0, dot));
    if (!numeric || index >= params_.size()) {
      throw ValueError("load_state_dict: entry '" + name + "' does not name one of the " +
                       std::to_string(params_.size()) + " parameters");
    }
    const std::string key = name.substr(dot + 1);
    if (key == "step") {
      param_steps_[index] = tensor.item<std::int64_t>();
      continue;
    }
    if (tensor.sizes() != params_[index].sizes()) {
      throw ShapeError("load_state_dict: entry '" + name + "' has shape " + shape_str(tensor.sizes()) +
                       ", parameter " + std::to_string(index) + " has shape " + shape_str(params_[index].sizes()));
    }
    state(index, key).copy_(tensor);
  }
  if (!have_lr || !have_count) throw ValueError("load_state_dict: the state lacks 'lr' or 'step_count'");
}

}  // namespace sublet::optim
