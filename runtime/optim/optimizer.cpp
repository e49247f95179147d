#include "runtime/optim/optimizer.h"

#include <cctype>

#include "core/errors.h"
#include "ops/optim_update.h"
#include "ops/stream_capture.h"
#include "runtime/allocation_scope.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"
#include "runtime/kernel_args.h"

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
  std::vector<std::size_t> indices;
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (params_[i].grad().defined()) indices.push_back(i);
  capturing_ = !params_.empty() && ops::stream_is_capturing(ops::Context::for_device(params_[0].device()));
  if (capturing_) {
    // Nothing runs now; prepare_replay() advances the counts before each replay instead.
    captured_indices_ = indices;
    captured_ = true;
  } else {
    ++step_count_;
    for (std::size_t i : indices) ++param_steps_[i];
  }
  struct ResetCapturing {
    bool& flag;
    ~ResetCapturing() { flag = false; }
  } reset{capturing_};
  update_params(indices);
}

void Optimizer::update_params(const std::vector<std::size_t>& indices) {
  if (capturing_)
    throw Error("optimizer: capturing a CUDA graph needs the fused update (options fused(true)): the per-parameter "
                "path would bake this step's learning rate and step counts into the graph");
  for (std::size_t i : indices) update(i, params_[i], params_[i].grad());
}

void Optimizer::prepare_replay() {
  if (!captured_) throw Error("optimizer: prepare_replay() without a step() captured into a CUDA graph");
  ++step_count_;
  for (std::size_t i : captured_indices_) ++param_steps_[i];
  if (device_scalars_.defined()) write_device_scalars();
}

const double* Optimizer::device_scalars() {
  if (params_.empty() || !params_[0].device().is_cuda()) return nullptr;
  if (!device_scalars_.defined()) {
    if (capturing_)
      throw Error("optimizer: run one eager step before capturing a CUDA graph (the device scalars and the "
                  "optimizer state are created on the first step)");
    AllocationCategoryGuard category(memory::BlockCategory::OptimizerState);
    device_scalars_ = Tensor::empty({static_cast<std::int64_t>(params_.size()) + 1},
                                    TensorOptions().dtype(DType::Float64).device(params_[0].device()));
  }
  if (!capturing_) write_device_scalars();
  return device_scalars_.data<double>();
}

void Optimizer::write_device_scalars() {
  std::vector<double> values(params_.size() + 1);
  values[0] = lr_;
  for (std::size_t i = 0; i < params_.size(); ++i) values[i + 1] = static_cast<double>(param_steps_[i]);
  ops::write_update_scalars(ops::Context::for_device(device_scalars_.device()), device_scalars_.data<double>(),
                            values.data(), static_cast<std::int64_t>(values.size()));
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.set_grad(Tensor());
}

void Optimizer::relocate_state() {
  NoGradGuard no_grad;
  AllocationCategoryGuard category(memory::BlockCategory::OptimizerState);
  for (auto& entries : state_)
    for (auto& [key, tensor] : entries) tensor = tensor.clone();
  if (device_scalars_.defined()) device_scalars_ = device_scalars_.clone();
}

std::size_t Optimizer::state_bytes_to_come() const {
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (state_[i].empty()) bytes += state_tensors_per_parameter() * params_[i].nbytes();
  return bytes;
}

Tensor& Optimizer::state(std::size_t index, const std::string& key, bool* created) {
  Tensor& slot = state_.at(index)[key];
  if (created) *created = !slot.defined();
  const Tensor& param = params_[index];
  if (!slot.defined()) {
    AllocationCategoryGuard category(memory::BlockCategory::OptimizerState);
    slot = zeros_like(param);  // in the parameter's layout (channels-last stays so)
  } else if (param.is_non_overlapping_and_dense() && slot.sizes() == param.sizes() &&
             !sublet::detail::same_layout(param.sizes(), slot.strides(), param.strides())) {
    // The parameter changed layout since (Module::to(MemoryFormat)): the fused updates walk
    // state and parameter as one flat array each, so the state follows.
    AllocationCategoryGuard category(memory::BlockCategory::OptimizerState);
    NoGradGuard no_grad;
    slot = sublet::detail::in_layout(slot, param.strides());
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
