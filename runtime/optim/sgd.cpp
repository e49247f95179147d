#include "runtime/optim/sgd.h"

#include "core/errors.h"
#include "ops/optim_update.h"
#include "runtime/optim/fused_params.h"

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
    bool created = false;
    Tensor& buf = state(index, "momentum_buffer", &created);
    // A buffer made by a loss-scaled step the device skipped holds nothing yet (count 1: first use).
    if (created || param_step(index) == 1) {
      buf.copy_(g);
    } else {
      buf.mul_(options_.momentum()).add_(g, 1.0 - options_.dampening());
    }
    g = options_.nesterov() ? g.add(buf, options_.momentum()) : buf;
  }
  param.add_(g, -lr());
}

bool SGD::fused_update_usable(const std::vector<std::size_t>& indices) const {
  return options_.fused() && detail::fused_supported(params(), indices);
}

void SGD::update_params(const std::vector<std::size_t>& indices) {
  detail::FusedParams fused = options_.fused() ? detail::fused_params(params(), indices) : detail::FusedParams{};
  if (!fused.usable) return Optimizer::update_params(indices);
  const bool use_momentum = options_.momentum() != 0.0;
  const ops::UpdateScalars scalars = fused_scalars();
  std::vector<ops::SgdTensor> tensors(indices.size());
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const std::size_t i = indices[k];
    ops::SgdTensor& t = tensors[k];
    t.param = params()[i].data_ptr();
    t.grad = fused.grads[k].data_ptr();
    params()[i].storage().bump_version();  // an in-place change, as add_() would record
    t.numel = params()[i].numel();
    t.step_slot = static_cast<std::int64_t>(i);  // fused_scalars() holds every parameter's count
    if (!use_momentum) continue;
    if (capturing() && !find_state(i, "momentum_buffer"))
      throw Error("SGD: parameter " + std::to_string(i) + " gets its first update inside a CUDA graph capture; "
                  "run eager steps first so that its momentum buffer exists");
    // A new buffer is zeros that the kernel overwrites with g (first = true), as copy_ does. So is
    // one whose only update so far was skipped on the device: the kernel sees its count at 1
    // (scalars.advance_counts); with the counts on the host it is known here (not while
    // capturing, where the count at capture says nothing about the replays).
    t.momentum_buffer = state(i, "momentum_buffer", &t.first).data_ptr();
    if (!scalars.advance_counts && !capturing() && param_step(i) == 1) t.first = true;
  }
  const ops::SgdHyper hyper{options_.momentum(), options_.dampening(), options_.weight_decay(), options_.nesterov()};
  ops::sgd_update(launch_context(fused.ctx), fused.dtype, tensors, hyper, scalars);
}

}  // namespace sublet::optim
