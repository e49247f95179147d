#pragma once
// Differentiable NN functions on Tensors, with the names and defaults of LibTorch's
// torch::nn::functional: each calls one ops/ kernel for the forward and records one autograd
// node whose backward calls the matching backward kernels. Inputs may be any strided layout
// (a contiguous copy is made when needed); all tensors of a call share dtype and device.
//
//   namespace F = sublet::nn::functional;
//   Tensor y = F::conv2d(x, w, b, F::Conv2dFuncOptions().stride(2).padding(1));
//   Tensor loss = F::cross_entropy(logits, labels, /*label_smoothing=*/0.1);
#include <array>
#include <cstdint>
#include <optional>

#include "runtime/generator.h"
#include "runtime/tensor.h"

namespace sublet::nn::functional {

// A (height, width) pair that a single number sets to (n, n), as LibTorch's ExpandingArray<2>.
struct Pair2d {
  std::int64_t h = 0, w = 0;
  Pair2d() = default;
  Pair2d(std::int64_t both) : h(both), w(both) {}  // NOLINT(google-explicit-constructor)
  Pair2d(std::int64_t height, std::int64_t width) : h(height), w(width) {}
};

// Defines option `name` of type Pair2d with a chained setter: opts.stride(2), opts.stride({2, 1}).
#define SUBLET_PAIR_OPTION(Options, name, default_value)            \
 public:                                                             \
  Options& name(Pair2d value) { name##_ = value; return *this; }     \
  const Pair2d& name() const { return name##_; }                     \
                                                                     \
 private:                                                            \
  Pair2d name##_ = default_value;

class Conv2dFuncOptions {
  SUBLET_PAIR_OPTION(Conv2dFuncOptions, stride, 1)
  SUBLET_PAIR_OPTION(Conv2dFuncOptions, padding, 0)
  SUBLET_PAIR_OPTION(Conv2dFuncOptions, dilation, 1)
 public:
  Conv2dFuncOptions& groups(std::int64_t value) { groups_ = value; return *this; }
  std::int64_t groups() const { return groups_; }

 private:
  std::int64_t groups_ = 1;
};

// stride defaults to the kernel size, as in PyTorch (an unset stride is {0, 0}).
class MaxPool2dFuncOptions {
 public:
  explicit MaxPool2dFuncOptions(Pair2d kernel_size) : kernel_size_(kernel_size) {}
  const Pair2d& kernel_size() const { return kernel_size_; }
  SUBLET_PAIR_OPTION(MaxPool2dFuncOptions, stride, 0)
  SUBLET_PAIR_OPTION(MaxPool2dFuncOptions, padding, 0)
  SUBLET_PAIR_OPTION(MaxPool2dFuncOptions, dilation, 1)

 private:
  Pair2d kernel_size_;
};

class AvgPool2dFuncOptions {
 public:
  explicit AvgPool2dFuncOptions(Pair2d kernel_size) : kernel_size_(kernel_size) {}
  const Pair2d& kernel_size() const { return kernel_size_; }
  AvgPool2dFuncOptions& count_include_pad(bool value) { count_include_pad_ = value; return *this; }
  bool count_include_pad() const { return count_include_pad_; }
  SUBLET_PAIR_OPTION(AvgPool2dFuncOptions, stride, 0)
  SUBLET_PAIR_OPTION(AvgPool2dFuncOptions, padding, 0)

 private:
  Pair2d kernel_size_;
  bool count_include_pad_ = true;
};

#undef SUBLET_PAIR_OPTION

// input [N, C, H, W], weight [OC, C/groups, KH, KW], bias [OC] or undefined.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              const Conv2dFuncOptions& options = {});

// input [N, C] or [N, C, H, W]; per-channel tensors [C]. Training normalises with the batch
// statistics and updates running_mean/running_var in place (when defined, as buffers: they
// must not require grad); evaluation uses the running statistics (required then).
// weight and bias may be undefined (no affine transform). num_batches_tracked (a sublet addition:
// BatchNorm2d's buffer, an int64 scalar on the input's device, or undefined) is incremented by one
// in training, inside the batch norm kernels' own launches where the backend folds it in
// (ops::batch_norm_forward_training), so a module's count costs no launch of its own.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = {}, const Tensor& bias = {}, bool training = false,
                  double momentum = 0.1, double eps = 1e-5, const Tensor& num_batches_tracked = {});

// relu(batch_norm(input, ...) + residual), the tail of a ResNet block (residual may be undefined:
// relu(batch_norm(input))). In training on a CUDA device it runs as one fused kernel each way
// (ops/batch_norm_relu.h) where the channel sizes allow; otherwise batch norm's kernels, with the
// add and the relu done in place on its output (the values and gradients of batch_norm, add and
// relu bit for bit, one buffer instead of three in the forward). Both agree within float rounding.
// num_batches_tracked as in batch_norm.
Tensor batch_norm_relu(const Tensor& input, const Tensor& residual, const Tensor& running_mean,
                       const Tensor& running_var, const Tensor& weight = {}, const Tensor& bias = {},
                       bool training = false, double momentum = 0.1, double eps = 1e-5,
                       const Tensor& num_batches_tracked = {});

Tensor max_pool2d(const Tensor& input, const MaxPool2dFuncOptions& options);
Tensor avg_pool2d(const Tensor& input, const AvgPool2dFuncOptions& options);
Tensor adaptive_avg_pool2d(const Tensor& input, Pair2d output_size);

// Over the last dimension (dim must name it; -1 does). Any rank: leading dims are rows.
Tensor log_softmax(const Tensor& input, std::int64_t dim);
// Mean over the batch; log_probs [N, C], targets int64 [N] in [0, C). Returns a 0-dim tensor.
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets);
// log_softmax + nll_loss in one node; loss = (1-eps) * nll + eps * mean_c(-log p_c).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, double label_smoothing = 0.0);

// Zeroes each element with probability p and scales the rest by 1/(1-p) while training; the
// identity otherwise. The mask comes from one 64-bit seed drawn from `generator`, so the same
// generator seed reproduces it; backward regenerates it instead of storing it.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true,
               Generator& generator = default_generator());

// softmax(scale * query key^T) value over [B, H, T, D] operands (PyTorch's layout and defaults:
// scale 1/sqrt(D); is_causal hides key s from query t when s > t, aligned at the upper left when
// the query and key lengths differ). key and value are [B, H, S, D]. Any strided operand is
// accepted: views with a unit stride over D (q, k, v split from one [B, T, 3, H, D] projection
// and transposed) are read in place, others are copied. On CUDA, bfloat16 and float16 run one
// fused kernel each way that never holds the [T, S] scores in memory; float32 and float64 run
// cuBLAS with the scores materialised; the CPU runs a reference loop. The output is laid out
// [B, T, H, D] in memory, so out.transpose(1, 2) is contiguous. Backward keeps only the output
// and one float32 log-sum-exp per query row besides the inputs.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt);

}  // namespace sublet::nn::functional
