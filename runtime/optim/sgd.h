#pragma once
// Stochastic gradient descent with PyTorch's semantics (torch.optim.SGD):
//   g = grad + weight_decay * p
//   momentum: buf = g on the first step, else buf = momentum * buf + (1 - dampening) * g
//             g = nesterov ? g + momentum * buf : buf
//   p -= lr * g
#include "runtime/optim/optimizer.h"

namespace sublet::optim {

class SGDOptions {
 public:
  explicit SGDOptions(double lr) : lr_(lr) {}
  SGDOptions& momentum(double v) { momentum_ = v; return *this; }
  SGDOptions& dampening(double v) { dampening_ = v; return *this; }
  SGDOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  SGDOptions& nesterov(bool v) { nesterov_ = v; return *this; }
  // One multi-tensor kernel for all parameters (ops/optim_update.h); false: one Tensor op at a
  // time (the reference the fused kernel is tested against).
  SGDOptions& fused(bool v) { fused_ = v; return *this; }
  double lr() const { return lr_; }
  double momentum() const { return momentum_; }
  double dampening() const { return dampening_; }
  double weight_decay() const { return weight_decay_; }
  bool nesterov() const { return nesterov_; }
  bool fused() const { return fused_; }

 private:
  double lr_, momentum_ = 0.0, dampening_ = 0.0, weight_decay_ = 0.0;
  bool nesterov_ = false;
  bool fused_ = true;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& options);
  // Undefined until the parameter's first update with momentum.
  Tensor momentum_buffer(std::size_t index) const {
    const Tensor* t = find_state(index, "momentum_buffer");
    return t ? *t : Tensor();
  }

 protected:
  void update(std::size_t index, Tensor& param, const Tensor& grad) override;
  void update_params(const std::vector<std::size_t>& indices) override;
  bool fused_update_usable(const std::vector<std::size_t>& indices) const override;
  std::size_t state_tensors_per_parameter() const override { return options_.momentum() != 0.0 ? 1 : 0; }

 private:
  SGDOptions options_;
};

}  // namespace sublet::optim
