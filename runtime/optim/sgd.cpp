#include "runtime/optim/sgd.h"

#include "memory/errors.h"

namespace sublet::optim {

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : Optimizer(std::move(params), options.lr()), options_(options) {
  if (options.momentum() < 0.0 || options.weight_decay() < 0.0) {
    throw ValueError("SGD: momentum and weight_decay must be >= 0, got " + std::to_string(options.momentum()) +
                     " and " + std::to_string(options.weight_decay()));
  }
  if (options.nesterov() && (options.momentum() <= 0.0 || options.dampening() != 0.0)) {
    throw ValueError("SGD: nesterov needs momentum > 0 and dampening 0");
  }
}

void SGD::update(std::size_t index, Tensor& param, const Tensor& grad) {
  Tensor g = grad;
  if (options_.weight_decay() != 0.0) g = g.add(param, options_.weight_decay());
  if (options_.momentum() != 0.0) {
    bool first = false;
    Tensor& buf = state(index, "momentum_buffer", &first);
    if (first) {
      buf.copy_(g);
    } else {
      buf.mul_(options_.momentum()).add_(g, 1.0 - options_.dampening());
    }
    g = options_.nesterov() ? g.add(buf, options_.momentum()) : buf;
  }
  param.add_(g, -lr());
}

}  // namespace sublet::optim
