#include "runtime/optim/adam.h"

#include <algorithm>
#include <cmath>

#include "core/errors.h"
#include "ops/optim_update.h"
#include "runtime/optim/fused_params.h"

namespace sublet::optim {

namespace {

std::vector<Tensor> all_params(const std::vector<AdamParamGroup>& groups) {
  std::vector<Tensor> params;
  for (const AdamParamGroup& g : groups) params.insert(params.end(), g.params.begin(), g.params.end());
  return params;
}

std::vector<double> per_param_weight_decay(const std::vector<AdamParamGroup>& groups, const AdamOptions& options) {
  std::vector<double> decays;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const double wd = groups[i].weight_decay.value_or(options.weight_decay());
    if (!(wd >= 0.0)) {
      throw ValueError("Adam: weight_decay of parameter group " + std::to_string(i) + " must be >= 0, got " +
                       std::to_string(wd));
    }
    decays.insert(decays.end(), groups[i].params.size(), wd);
  }
  return decays;
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options) : Adam({{std::move(params), {}}}, options, false) {}

Adam::Adam(std::vector<AdamParamGroup> groups, const AdamOptions& options) : Adam(std::move(groups), options, false) {}

Adam::Adam(std::vector<AdamParamGroup> groups, const AdamOptions& options, bool decoupled_weight_decay)
    : Optimizer(all_params(groups), options.lr()),
      options_(options),
      decoupled_(decoupled_weight_decay),
      weight_decays_(per_param_weight_decay(groups, options)) {
  const bool betas_ok = options.beta1() >= 0.0 && options.beta1() < 1.0 && options.beta2() >= 0.0 && options.beta2() < 1.0;
  if (!betas_ok || options.eps() < 0.0 || options.weight_decay() < 0.0) {
    throw ValueError("Adam: need betas in [0, 1) and eps, weight_decay >= 0; got betas (" +
                     std::to_string(options.beta1()) + ", " + std::to_string(options.beta2()) + "), eps " +
                     std::to_string(options.eps()) + ", weight_decay " + std::to_string(options.weight_decay()));
  }
}

void Adam::update(std::size_t index, Tensor& param, const Tensor& grad) {
  const double beta1 = options_.beta1(), beta2 = options_.beta2();
  Tensor g = grad;
  const double weight_decay = weight_decays_[index];
  if (weight_decay != 0.0) {
    if (decoupled_) {
      param.mul_(1.0 - lr() * weight_decay);
    } else {
      g = g.add(param, weight_decay);
    }
  }
  Tensor& m = state(index, "exp_avg");
  Tensor& v = state(index, "exp_avg_sq");
  // Per parameter: one that starts receiving gradients late gets its own bias correction.
  const auto t = static_cast<double>(param_step(index));
  m.mul_(beta1).add_(g, 1.0 - beta1);
  v.mul_(beta2).addcmul_(g, g, 1.0 - beta2);
  const double bias_correction1 = 1.0 - std::pow(beta1, t);
  const double bias_correction2 = 1.0 - std::pow(beta2, t);
  Tensor denom = v.sqrt().div_(std::sqrt(bias_correction2)).add_(options_.eps());
  param.addcdiv_(m, denom, -lr() / bias_correction1);
}

bool Adam::fused_update_usable(const std::vector<std::size_t>& indices) const {
  return options_.fused() && detail::fused_supported(params(), indices);
}

void Adam::update_params(const std::vector<std::size_t>& indices) {
  detail::FusedParams fused = options_.fused() ? detail::fused_params(params(), indices) : detail::FusedParams{};
  if (!fused.usable) return Optimizer::update_params(indices);
  const ops::UpdateScalars scalars = fused_scalars();
  // One launch per distinct weight decay (parameter groups), in order of first appearance; the
  // optimizer's own step count (counter_slot) is advanced by the first launch only.
  std::vector<double> decays;
  for (std::size_t i : indices) {
    if (std::find(decays.begin(), decays.end(), weight_decays_[i]) == decays.end()) decays.push_back(weight_decays_[i]);
  }
  for (std::size_t d = 0; d < decays.size(); ++d) {
    std::vector<ops::AdamTensor> tensors;
    for (std::size_t k = 0; k < indices.size(); ++k) {
      const std::size_t i = indices[k];
      if (weight_decays_[i] != decays[d]) continue;
      if (capturing() && !find_state(i, "exp_avg"))
        throw Error("Adam: parameter " + std::to_string(i) + " gets its first update inside a CUDA graph capture; "
                    "run eager steps first so that its moments exist");
      ops::AdamTensor t;
      t.param = params()[i].data_ptr();
      t.grad = fused.grads[k].data_ptr();
      t.exp_avg = state(i, "exp_avg").data_ptr();
      t.exp_avg_sq = state(i, "exp_avg_sq").data_ptr();
      params()[i].storage().bump_version();  // an in-place change, as add_() would record
      t.numel = params()[i].numel();
      // The host count only when the kernel reads no device counts (host counts are current then;
      // with device counts they may be out of date, and reading them back would sync).
      t.step = scalars.device ? 0 : param_step(i);
      t.step_slot = static_cast<std::int64_t>(i);  // fused_scalars() holds every parameter's count
      tensors.push_back(t);
    }
    ops::UpdateScalars launch_scalars = scalars;
    if (d > 0) launch_scalars.counter_slot = -1;
    const ops::AdamHyper hyper{options_.beta1(), options_.beta2(), options_.eps(), decays[d], decoupled_};
    ops::adam_update(launch_context(fused.ctx), fused.dtype, tensors, hyper, launch_scalars);
  }
}

}  // namespace sublet::optim
