#include "runtime/nn/batch_norm.h"

#include <string>

#include "core/errors.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/sync_batch_norm.h"

namespace sublet::nn {

BatchNorm2d::BatchNorm2d(const BatchNorm2dOptions& options) : Module("BatchNorm2d"), options_(options) {
  if (options.num_features() <= 0) {
    throw ValueError("BatchNorm2d: num_features must be positive, got " + std::to_string(options.num_features()));
  }
  if (!(options.eps() > 0)) throw ValueError("BatchNorm2d: eps must be positive, got " + std::to_string(options.eps()));
  if (options.momentum() && !(*options.momentum() >= 0 && *options.momentum() <= 1)) {
    throw ValueError("BatchNorm2d: momentum must be in [0, 1], got " + std::to_string(*options.momentum()));
  }
  const std::int64_t c = options.num_features();
  if (options.affine()) {
    weight = register_parameter("weight", ones({c}, options.dtype()));
    bias = register_parameter("bias", zeros({c}, options.dtype()));
  }
  if (options.track_running_stats()) {
    running_mean = register_buffer("running_mean", zeros({c}, options.dtype()));
    running_var = register_buffer("running_var", ones({c}, options.dtype()));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, DType::Int64));
  }
}

void BatchNorm2d::check_input(const Tensor& input) const {
  if (input.dim() != 4) {
    throw ShapeError("BatchNorm2d: input must be 4-D (N,C,H,W), got " + shape_str(input.sizes()));
  }
  if (input.size(1) != options_.num_features()) {
    throw ShapeError("BatchNorm2d: expected " + std::to_string(options_.num_features()) + " channels, got input " +
                     shape_str(input.sizes()));
  }
}

BatchNorm2d::BatchCount BatchNorm2d::count_batch_and_momentum(bool synchronised) {
  // Without running statistics the batch statistics are used in eval too (PyTorch does the same).
  BatchCount count{options_.momentum().value_or(0.0), Tensor()};
  if (!is_training() || !options_.track_running_stats()) return count;
  if (options_.momentum() && !synchronised) {
    count.counter = num_batches_tracked;  // the kernels count it
    return count;
  }
  NoGradGuard no_grad;
  num_batches_tracked.add_(1.0);
  if (!options_.momentum()) count.momentum = 1.0 / static_cast<double>(num_batches_tracked.item<std::int64_t>());
  return count;
}

Tensor BatchNorm2d::forward(const Tensor& input) {
  check_input(input);
  const bool synchronised = is_training() && sync_batch_norm_active();
  const BatchCount count = count_batch_and_momentum(synchronised);
  if (synchronised)
    return sync_batch_norm(input, {}, false, running_mean, running_var, weight, bias, count.momentum, options_.eps());
  return functional::batch_norm(input, running_mean, running_var, weight, bias, use_batch_stats(), count.momentum,
                                options_.eps(), count.counter);
}

Tensor BatchNorm2d::forward_relu(const Tensor& input, const Tensor& residual) {
  return call_with_hooks(input, [&](const Tensor& x) {
    check_input(x);
    const bool synchronised = is_training() && sync_batch_norm_active();
    const BatchCount count = count_batch_and_momentum(synchronised);
    if (synchronised)
      return sync_batch_norm(x, residual, true, running_mean, running_var, weight, bias, count.momentum,
                             options_.eps());
    return functional::batch_norm_relu(x, residual, running_mean, running_var, weight, bias, use_batch_stats(),
                                       count.momentum, options_.eps(), count.counter);
  });
}

}  // namespace sublet::nn
