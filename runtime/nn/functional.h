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
#include <vector>

#include "ops/gelu.h"
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

// Over dimension `dim` (negative counts from the end); the last dimension is the fast path, any
// other is moved last and back (one copy each way). Under autocast both run in float32.
Tensor softmax(const Tensor& input, std::int64_t dim);
Tensor log_softmax(const Tensor& input, std::int64_t dim);
// Mean over the batch; log_probs [N, C], targets int64 [N] in [0, C). Returns a 0-dim tensor.
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets);

class CrossEntropyFuncOptions {
 public:
  // Samples whose target equals it add nothing to the loss and are not counted in its mean.
  CrossEntropyFuncOptions& ignore_index(std::int64_t value) { ignore_index_ = value; return *this; }
  // loss = (1-eps) * nll + eps * mean_c(-log p_c); in [0, 1].
  CrossEntropyFuncOptions& label_smoothing(double value) { label_smoothing_ = value; return *this; }
  std::int64_t ignore_index() const { return ignore_index_; }
  double label_smoothing() const { return label_smoothing_; }

 private:
  std::int64_t ignore_index_ = -100;
  double label_smoothing_ = 0.0;
};

// log_softmax + nll_loss in one node, mean over the samples whose target is not ignore_index
// (NaN when every target is ignored, as PyTorch). logits [N, C] with targets [N], or any
// [..., C] with targets [...] (GPT's [B, T, V] with [B, T]): the class dimension is the last,
// as in nanoGPT's logits.view(-1, V) (PyTorch's own 3-D form puts classes in dim 1). On CUDA the
// logits are read in their own dtype, 16-bit included, and never copied to float32 (the CPU,
// without 16-bit kernels, copies them): the loss is float32 for float32 and 16-bit logits
// (float64 for float64) and the gradient is in the logits' dtype. Autocast leaves 16-bit logits
// as they are.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyFuncOptions& options);
// The same with label smoothing and the default ignore_index (-100).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, double label_smoothing = 0.0);

// y = x W^T + b over the last dimension: input [..., in], weight [out, in], bias [out] or
// undefined. Under autocast it runs in the 16-bit type.
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = {});

// An MLP's hidden layer with the tanh GELU, as GPT-2's c_fc -> GELU -> c_proj:
//   linear(gelu(linear(input, fc_weight, fc_bias), Tanh), proj_weight, proj_bias)
// with fc_weight [hidden, in], fc_bias [hidden], proj_weight [out, hidden], proj_bias [out]. On
// CUDA in bfloat16/float16 (autocast included) the GELU runs in cuBLASLt's GEMM epilogues
// (ops/linear_gelu.h) as one node, whose backward takes the hidden layer's gradient and fc_bias's
// gradient out of one GEMM, when TuningOptions::gelu_epilogue is on (core/tuning.h; off
// by default: slower than the separate kernels in GPT-2 small's step on an H100); elsewhere, or
// where cuBLASLt declines the shape, the three ops.
Tensor linear_gelu_linear(const Tensor& input, const Tensor& fc_weight, const Tensor& fc_bias,
                          const Tensor& proj_weight, const Tensor& proj_bias);
// linear_gelu_linear's fused form alone: an undefined tensor where it does not apply, so that a
// caller can run its modules instead (GPT's MLP, whose submodules' hooks then fire).
Tensor linear_gelu_linear_fused(const Tensor& input, const Tensor& fc_weight, const Tensor& fc_bias,
                                const Tensor& proj_weight, const Tensor& proj_bias);

class EmbeddingFuncOptions {
 public:
  // Backward sums each id's gradient rows in a fixed order, so the table's gradient is
  // bit-identical from run to run. On CUDA this sorts the ids; without it the rows are added
  // with atomics (faster, the order varies). The CPU is always deterministic.
  EmbeddingFuncOptions& deterministic(bool value) { deterministic_ = value; return *this; }
  bool deterministic() const { return deterministic_; }

 private:
  bool deterministic_ = false;
};

// Rows of weight [num_embeddings, dim] at int64 indices of any shape: output [..., dim].
// An id outside [0, num_embeddings) is a ValueError naming it and the table size.
Tensor embedding(const Tensor& weight, const Tensor& indices, const EmbeddingFuncOptions& options = {});

// Normalises over the trailing dimensions named by normalized_shape (GPT: {C}, the last one),
// as torch.nn.functional.layer_norm; weight and bias of that shape, or undefined. One fused
// kernel each way; statistics in float32 for float32 and 16-bit inputs (float64 for float64).
// Under autocast it runs in float32.
// output_dtype: the result as layer_norm(...).to(*output_dtype), gradients included. On CUDA a
// float32 norm writes a bfloat16/float16 output itself and takes that type's gradient as it is
// (the same bits as the norm and the cast, one kernel fewer each way): what a block under autocast
// asks for when a linear, which casts its input to the 16-bit type, comes next.
Tensor layer_norm(const Tensor& input, std::vector<std::int64_t> normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5, std::optional<DType> output_dtype = std::nullopt);

// GELU, exact (None) or with GPT-2's tanh approximation, as F.gelu(x, approximate="tanh").
using ops::GeluApproximate;
Tensor gelu(const Tensor& input, GeluApproximate approximate = GeluApproximate::None);

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
// fused kernel each way that never holds the [T, S] scores in memory (cuDNN's fused flash
// attention, or sublet's own kernels: docs/configuration.md); float32 and float64 run
// cuBLAS with the scores materialised; the CPU runs a reference loop. The output is laid out
// [B, T, H, D] in memory, so out.transpose(1, 2) is contiguous. Backward keeps only the output
// and one float32 log-sum-exp per query row besides the inputs.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt);

// Self-attention of the q, k, v packed in one [B, T, 3 * H * D] projection (q, then k, then v
// along the last dim, each [B, T, H, D] in memory: a GPT's c_attn output), split into `heads`
// heads: the same values as scaled_dot_product_attention on the three [B, H, T, D] views, read in
// place, output [B, H, T, D] laid out [B, T, H, D]. Backward writes dQ, dK and dV straight into
// one [B, T, 3 * H * D] gradient, where the three views would each give a zero-filled gradient of
// the whole projection to be summed.
Tensor packed_self_attention(const Tensor& qkv, std::int64_t heads, bool is_causal = false,
                             std::optional<double> scale = std::nullopt);

}  // namespace sublet::nn::functional
