#include "runtime/nn/sync_batch_norm.h"

#include <string>

#include "core/errors.h"
#include "runtime/autograd/function.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"

namespace sublet::nn {
namespace {

RankSum& active_sum() {
  static RankSum sum;
  return sum;
}

// sum over ranks, differentiable: the gradient of every rank's input is the sum over ranks of
// the output's gradients.
Tensor rank_sum(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = x.contiguous().clone();
    active_sum()(out);
  }
  autograd::record("sync_batch_norm_rank_sum", {x}, {out}, [](const autograd::TensorList& grads) {
    Tensor g = grads[0].contiguous().clone();
    active_sum()(g);
    return autograd::TensorList{g};
  });
  return out;
}

}  // namespace

SyncBatchNormScope::SyncBatchNormScope(RankSum sum) : previous_(std::move(active_sum())) {
  active_sum() = std::move(sum);
}

SyncBatchNormScope::~SyncBatchNormScope() { active_sum() = std::move(previous_); }

bool sync_batch_norm_active() { return static_cast<bool>(active_sum()); }

Tensor sync_batch_norm(const Tensor& input, const Tensor& residual, bool relu, const Tensor& running_mean,
                       const Tensor& running_var, const Tensor& weight, const Tensor& bias, double momentum, double eps) {
  if (!sync_batch_norm_active()) throw Error("sync_batch_norm: no SyncBatchNormScope is active");
  const std::int64_t c = input.size(1);
  const Shape per_channel{1, c, 1, 1};
  // The element count over all ranks (ranks may hold batches of different sizes), kept on the
  // device: reading it on the host would wait for the device in every layer of every step.
  const std::int64_t local_count = input.numel() / c;
  Tensor count = full({1}, static_cast<double>(local_count), TensorOptions().dtype(input.dtype()).device(input.device()));
  {
    NoGradGuard no_grad;
    active_sum()(count);
  }
  // Only a rank with fewer than two values per channel can make the total too small: only it
  // reads the total (the check PyTorch's SyncBatchNorm makes).
  if (local_count < 2) {
    const double n = count.item<double>();
    if (n < 2.0) throw ValueError("sync_batch_norm: expected more than one value per channel over all ranks, got " +
                                  std::to_string(static_cast<std::int64_t>(n)));
  }
  const Tensor mean = rank_sum(input.sum({0, 2, 3})) / count;
  const Tensor centered = input - mean.view(per_channel);
  const Tensor var = rank_sum((centered * centered).sum({0, 2, 3})) / count;
  Tensor out = centered * (var + eps).pow(-0.5).view(per_channel);
  if (weight.defined()) out = out * weight.view(per_channel);
  if (bias.defined()) out = out + bias.view(per_channel);
  if (running_mean.defined()) {
    NoGradGuard no_grad;
    Tensor running_mean_ = running_mean, running_var_ = running_var;  // handles to the module's buffers
    running_mean_.mul_(1.0 - momentum).add_(mean.detach() * momentum);
    running_var_.mul_(1.0 - momentum).add_(var.detach() * (count / (count - 1.0)) * momentum);  // unbiased
  }
  if (residual.defined()) out = out + residual;
  return relu ? out.relu() : out;
}

}  // namespace sublet::nn
