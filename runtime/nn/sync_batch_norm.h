#pragma once
// Batch statistics over every data-parallel rank, as PyTorch's SyncBatchNorm
// (`sublet train --sync-batch-norm`). By default each rank normalises with its own batch's mean
// and variance (as DDP does); while a SyncBatchNormScope is alive, every BatchNorm2d in training
// computes them over the batches of all ranks instead: the element count, the per-channel sum,
// then the sum of squared deviations from the global mean, each summed over ranks (three
// all-reduces per layer in forward, two in backward; the two-pass variance avoids
// E[x^2] - E[x]^2's cancellation). The all-reduce is an
// autograd op whose backward all-reduces the gradient, so backward, too, sees every rank's batch.
// Running statistics get the global mean and the unbiased global variance, the same on every
// rank. Composed of Tensor ops: slower than the fused single-GPU kernels.
#include <functional>

#include "runtime/tensor.h"

namespace sublet::nn {

// Replaces `values` (a contiguous tensor on the rank's device) with its element-wise sum over all
// ranks, in place, on the current stream.
using RankSum = std::function<void(Tensor& values)>;

class SyncBatchNormScope {
 public:
  explicit SyncBatchNormScope(RankSum sum);
  ~SyncBatchNormScope();
  SyncBatchNormScope(const SyncBatchNormScope&) = delete;
  SyncBatchNormScope& operator=(const SyncBatchNormScope&) = delete;

 private:
  RankSum previous_;
};

bool sync_batch_norm_active();

// Training-mode batch norm of `input` [N, C, H, W] with statistics over all ranks, then
// relu(out + residual) when `relu` (residual may be undefined). Updates the running statistics
// when they are defined. Requires an active SyncBatchNormScope.
Tensor sync_batch_norm(const Tensor& input, const Tensor& residual, bool relu, const Tensor& running_mean,
                       const Tensor& running_var, const Tensor& weight, const Tensor& bias, double momentum, double eps);

}  // namespace sublet::nn
