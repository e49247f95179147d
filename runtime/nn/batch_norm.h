#pragma once
// nn::BatchNorm2d, as LibTorch's: nn::BatchNorm2d(nn::BatchNorm2dOptions(64).momentum(0.1).eps(1e-5)).
// Buffers running_mean (zeros), running_var (ones) and num_batches_tracked (int64 scalar) share
// PyTorch's names, so state dicts line up. Training normalises with the batch statistics and
// updates the running ones (running = (1 - momentum) * running + momentum * batch, unbiased batch
// variance); evaluation normalises with the running statistics. A momentum of nullopt means a
// cumulative average (factor 1 / num_batches_tracked), as PyTorch's momentum=None.
// weight starts at 1 and bias at 0 (PyTorch's default).
#include <cstdint>
#include <optional>

#include "runtime/nn/module.h"

namespace sublet::nn {

class BatchNorm2dOptions {
 public:
  explicit BatchNorm2dOptions(std::int64_t num_features) : num_features_(num_features) {}
  BatchNorm2dOptions& eps(double value) { eps_ = value; return *this; }
  BatchNorm2dOptions& momentum(std::optional<double> value) { momentum_ = value; return *this; }
  BatchNorm2dOptions& affine(bool value) { affine_ = value; return *this; }
  BatchNorm2dOptions& track_running_stats(bool value) { track_running_stats_ = value; return *this; }
  BatchNorm2dOptions& dtype(DType value) { dtype_ = value; return *this; }

  std::int64_t num_features() const { return num_features_; }
  double eps() const { return eps_; }
  std::optional<double> momentum() const { return momentum_; }
  bool affine() const { return affine_; }
  bool track_running_stats() const { return track_running_stats_; }
  DType dtype() const { return dtype_; }

 private:
  std::int64_t num_features_;
  double eps_ = 1e-5;
  std::optional<double> momentum_ = 0.1;
  bool affine_ = true;
  bool track_running_stats_ = true;
  DType dtype_ = DType::Float32;
};

class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(const BatchNorm2dOptions& options);
  explicit BatchNorm2d(std::int64_t num_features) : BatchNorm2d(BatchNorm2dOptions(num_features)) {}
  // input [N, C, H, W] with C = num_features.
  Tensor forward(const Tensor& input) override;
  // relu(forward(input) + residual) (residual may be undefined), with this module's hooks; on a
  // CUDA device in training one fused kernel each way (nn::functional::batch_norm_relu). A ResNet
  // block's `relu(bn(x))` and `relu(bn(x) + identity)` call this in place of bn then relu.
  Tensor forward_relu(const Tensor& input, const Tensor& residual = {});
  const BatchNorm2dOptions& options() const { return options_; }

  Tensor weight, bias;                                     // [C]; undefined without affine
  Tensor running_mean, running_var, num_batches_tracked;   // undefined without track_running_stats

 private:
  void check_input(const Tensor& input) const;
  // The momentum to use (the cumulative 1 / num_batches_tracked where the options' momentum is
  // nullopt) and, when training with running statistics, the batch's count: num_batches_tracked
  // is returned for the batch norm kernels to increment (folded into their launches where the
  // backend can, nn::functional::batch_norm), or incremented here where its new value is needed
  // at once (momentum nullopt) or the statistics are synchronised (sync_batch_norm).
  struct BatchCount {
    double momentum;
    Tensor counter;  // for nn::functional: undefined when counted here or not counted at all
  };
  BatchCount count_batch_and_momentum(bool synchronised);
  bool use_batch_stats() const { return is_training() || !options_.track_running_stats(); }

  BatchNorm2dOptions options_;
};

}  // namespace sublet::nn
