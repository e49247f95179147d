#pragma once
// Adam and AdamW with PyTorch's semantics (torch.optim.Adam / AdamW, amsgrad off):
//   Adam:  g = grad + weight_decay * p            (L2 penalty in the gradient)
//   AdamW: p *= 1 - lr * weight_decay             (decoupled decay), g = grad
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
#include <optional>

#include "runtime/optim/optimizer.h"

namespace sublet::optim {

// Parameters that share hyperparameters, as an entry of PyTorch's param_groups: nanoGPT decays
// its 2-D weights and not its biases and layer-norm parameters:
//   AdamW opt({{decay_params, 0.1}, {no_decay_params, 0.0}}, AdamOptions(6e-4).betas(0.9, 0.95));
// weight_decay unset: the options' value. Parameter indices (state_dict, exp_avg) count through
// the groups in order.
struct AdamParamGroup {
  std::vector<Tensor> params;
  std::optional<double> weight_decay;
};

class AdamOptions {
 public:
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  AdamOptions& betas(double beta1, double beta2) { beta1_ = beta1; beta2_ = beta2; return *this; }
  AdamOptions& eps(double v) { eps_ = v; return *this; }
  AdamOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  // One multi-tensor kernel for all parameters (ops/optim_update.h); false: Tensor ops.
  AdamOptions& fused(bool v) { fused_ = v; return *this; }
  double lr() const { return lr_; }
  double beta1() const { return beta1_; }
  double beta2() const { return beta2_; }
  double eps() const { return eps_; }
  double weight_decay() const { return weight_decay_; }
  bool fused() const { return fused_; }

 private:
  double lr_, beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8, weight_decay_ = 0.0;
  bool fused_ = true;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options);
  Adam(std::vector<AdamParamGroup> groups, const AdamOptions& options);
  // The weight decay parameter `index` gets (its group's).
  double weight_decay(std::size_t index) const { return weight_decays_.at(index); }
  // Undefined until the parameter's first update.
  Tensor exp_avg(std::size_t index) const { return state_or_undefined(index, "exp_avg"); }
  Tensor exp_avg_sq(std::size_t index) const { return state_or_undefined(index, "exp_avg_sq"); }

 protected:
  Adam(std::vector<AdamParamGroup> groups, const AdamOptions& options, bool decoupled_weight_decay);
  void update(std::size_t index, Tensor& param, const Tensor& grad) override;
  void update_params(const std::vector<std::size_t>& indices) override;
  bool fused_update_usable(const std::vector<std::size_t>& indices) const override;
  std::size_t state_tensors_per_parameter() const override { return 2; }  // exp_avg, exp_avg_sq

 private:
  Tensor state_or_undefined(std::size_t index, const char* key) const {
    const Tensor* t = find_state(index, key);
    return t ? *t : Tensor();
  }
  AdamOptions options_;
  bool decoupled_;
  std::vector<double> weight_decays_;  // per parameter
};

// Adam with decoupled weight decay; PyTorch's default weight_decay for AdamW is 0.01.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, const AdamOptions& options) : Adam({{std::move(params), {}}}, options, true) {}
  AdamW(std::vector<AdamParamGroup> groups, const AdamOptions& options) : Adam(std::move(groups), options, true) {}
};

}  // namespace sublet::optim
