#include "runtime/optim/optimizer.h"

#include <cctype>

#include "core/errors.h"
#include "memory/registry.h"
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

void Optimizer::step() { run_step(nullptr); }

StepOutcome Optimizer::step(const SkipIfNonFinite& skip) {
  check_skip_tensors(skip);
  return run_step(&skip);
}

void Optimizer::check_skip_tensors(const SkipIfNonFinite& skip) const {
  const auto check = [&](const Tensor& t, const char* what) {
    if (!t.defined() || t.dtype() != DType::Float32 || t.numel() != 1)
      throw ValueError(std::string("optimizer step: ") + what + " must be a 1-element float32 tensor, got " +
                       (t.defined() ? t.to_string() : std::string("an undefined tensor")));
    if (!params_.empty() && t.device() != params_[0].device())
      throw DeviceError(std::string("optimizer step: ") + what + " must be on the parameters' device " +
                        params_[0].device().str() + ", got " + t.device().str());
  };
  check(skip.found_inf, "found_inf");
  if (skip.inv_scale.defined()) check(skip.inv_scale, "inv_scale");
}

StepOutcome Optimizer::run_step(const SkipIfNonFinite* skip) {
  NoGradGuard no_grad;
  AllocationCategoryGuard temporaries(memory::BlockCategory::Temporary);
  std::vector<std::size_t> indices;
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (params_[i].grad().defined()) indices.push_back(i);
  capturing_ = !params_.empty() && ops::stream_is_capturing(ops::Context::for_device(params_[0].device()));
  const StepFlagsReset reset{*this};
  if (skip && fused_update_usable(indices)) {
    // The kernels read the flag and advance the counts (fused_scalars()); nothing is read here.
    device_skip_ = skip;
    if (capturing_) record_captured_step(indices, /*counts_on_device=*/true);
    update_params(indices);
    return StepOutcome::DecidedOnDevice;
  }
  if (skip) {
    if (capturing_)
      throw Error("optimizer: a CUDA graph can capture a loss-scaled step only with the fused update (SGD/Adam "
                  "fused(true), float32/float64 parameters and gradients on one device): this step would read the "
                  "found-inf flag on the host");
    const float found_inf = skip->found_inf.item<float>();  // the host read (a sync on the GPU)
    if (!(found_inf == 0.0f)) return StepOutcome::Skipped;
    if (skip->inv_scale.defined()) {
      for (std::size_t i : indices) {
        Tensor g = params_[i].grad();
        g.mul_(skip->inv_scale.to(g.dtype()));
      }
    }
  }
  if (capturing_) {
    // Nothing runs now; prepare_replay() advances the counts before each replay instead.
    record_captured_step(indices, /*counts_on_device=*/false);
  } else {
    refresh_host_counts();
    ++step_count_;
    for (std::size_t i : indices) ++param_steps_[i];
    device_counts_current_ = false;  // until device_scalars() writes them
  }
  update_params(indices);
  return StepOutcome::Stepped;
}

void Optimizer::record_captured_step(std::vector<std::size_t> indices, bool counts_on_device) {
  captured_indices_ = std::move(indices);
  captured_ = true;
  captured_on_device_ = counts_on_device;
}

std::int64_t Optimizer::step_count() const {
  refresh_host_counts();
  return step_count_;
}

std::int64_t Optimizer::param_step(std::size_t index) const {
  refresh_host_counts();
  return param_steps_.at(index);
}

bool Optimizer::fused_update_usable(const std::vector<std::size_t>&) const { return false; }

void Optimizer::update_params(const std::vector<std::size_t>& indices) {
  if (capturing_)
    throw Error("optimizer: capturing a CUDA graph needs the fused update (options fused(true)): the per-parameter "
                "path would bake this step's learning rate and step counts into the graph");
  for (std::size_t i : indices) update(i, params_[i], params_[i].grad());
}

void Optimizer::prepare_replay() {
  if (!captured_) throw Error("optimizer: prepare_replay() without a step() captured into a CUDA graph");
  if (captured_on_device_) {
    // The replay's kernels advance the counts unless its found-inf flag skips the step.
    write_device_scalars(!device_counts_current_);
    host_counts_current_ = false;
    return;
  }
  refresh_host_counts();
  ++step_count_;
  for (std::size_t i : captured_indices_) ++param_steps_[i];
  device_counts_current_ = false;
  if (device_scalars_.defined()) write_device_scalars(true);
}

ops::UpdateScalars Optimizer::fused_scalars() {
  ops::UpdateScalars scalars;
  scalars.lr = lr_;
  scalars.device = device_scalars(device_skip_ != nullptr);
  if (device_skip_) {
    scalars.advance_counts = true;
    scalars.counter_slot = static_cast<std::int64_t>(params_.size());
    scalars.found_inf = device_skip_->found_inf.data<float>();
    scalars.inv_scale = device_skip_->inv_scale.defined() ? device_skip_->inv_scale.data<float>() : nullptr;
  }
  return scalars;
}

double* Optimizer::device_scalars(bool device_decides) {
  if (params_.empty()) return nullptr;
  // CPU parameters take host scalars, unless the kernels must advance the counts themselves.
  if (!params_[0].device().is_cuda() && !device_decides) return nullptr;
  if (!device_scalars_.defined()) {
    if (capturing_)
      throw Error("optimizer: run one eager step before capturing a CUDA graph (the device scalars and the "
                  "optimizer state are created on the first step)");
    AllocationCategoryGuard category(memory::BlockCategory::OptimizerState);
    device_scalars_ = Tensor::empty({static_cast<std::int64_t>(params_.size()) + 2},
                                    TensorOptions().dtype(DType::Float64).device(params_[0].device()));
    device_counts_current_ = false;
  }
  if (capturing_) {
    // The replays read what prepare_replay() writes; counts advanced on the device must be there already.
    if (device_decides && !device_counts_current_)
      throw Error("optimizer: a loss-scaled step is captured while the step counts are not on the device (after "
                  "load_state_dict?): run one eager step before the capture");
  } else if (device_decides) {
    write_device_scalars(!device_counts_current_);
    host_counts_current_ = false;  // the kernels advance the device's counts
  } else {
    write_device_scalars(true);  // run_step() advanced the host's counts
  }
  return device_scalars_.data<double>();
}

void Optimizer::write_device_scalars(bool with_counts) {
  const std::size_t n = params_.size();
  std::vector<double> values(with_counts ? n + 2 : 1);
  values[0] = lr_;
  if (with_counts) {
    for (std::size_t i = 0; i < n; ++i) values[i + 1] = static_cast<double>(param_steps_[i]);
    values[n + 1] = static_cast<double>(step_count_);
  }
  ops::write_update_scalars(ops::Context::for_device(device_scalars_.device()), device_scalars_.data<double>(),
                            values.data(), static_cast<std::int64_t>(values.size()));
  if (with_counts) device_counts_current_ = true;
}

void Optimizer::refresh_host_counts() const {
  if (host_counts_current_) return;
  const std::size_t n = params_.size();
  const std::vector<double> values = device_scalars_.to(Device::cpu()).to_vector<double>();  // waits for the device
  for (std::size_t i = 0; i < n; ++i) param_steps_[i] = static_cast<std::int64_t>(values[i + 1]);
  step_count_ = static_cast<std::int64_t>(values[n + 1]);
  host_counts_current_ = true;
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
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!state_[i].empty()) continue;
    // As the allocator will count them: each state tensor is a block of the rounded size.
    const memory::CachingAllocator& allocator = memory::allocator_for(params_[i].device());
    const std::size_t block = memory::CachingAllocator::round_size(static_cast<std::size_t>(params_[i].nbytes()),
                                                                   allocator.config());
    bytes += state_tensors_per_parameter() * block;
  }
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
  refresh_host_counts();
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
  refresh_host_counts();  // entries the state lacks keep their current counts
  device_counts_current_ = false;
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
