#pragma once
// Training-mode batch norm fused with the ReLU that follows it, and optionally with a residual
// added before the ReLU, as a ResNet block's tail:  output = relu(batch_norm(input) + residual).
// Same semantics as ops/batch_norm.h (batch statistics, biased variance for normalising, running
// statistics moved towards the unbiased variance); one kernel per pass on the GPU.
//
// Only where batch_norm_relu_fused() says so: CUDA devices; float32/float64 NCHW with channels of
// at most kFusedBatchNormMaxPerChannel values (one block per channel, its values in registers);
// bfloat16/float16 NCHW and float32/bfloat16/float16 channels-last of any size (float32
// parameters, ops/cuda/batch_norm_split.cu: each channel split over many blocks). The CPU:
// float32/float64 NCHW of any size (ops/cpu/batch_norm_relu_cpu.cpp, batch norm + add + relu's
// values bit for bit).
// Callers compose batch_norm, add and relu otherwise (runtime/nn/functional.h:
// batch_norm_relu does).
#include <cstdint>

#include "ops/batch_norm.h"
#include "ops/context.h"
#include "core/dtype.h"

namespace sublet::ops {

// N * H * W of the largest channel the fused kernels take: 512 threads x 4 values. Up to this
// size the fused forward + backward beats the composed kernels (kernel_bench's batch-norm rows);
// above it, and with thousands of channels, one block per channel with its values in registers
// runs out of parallelism and occupancy, where cuDNN spreads a channel over many blocks.
inline constexpr std::int64_t kFusedBatchNormMaxPerChannel = 2048;

bool batch_norm_relu_fused(const Context& ctx, const BatchNormShape& shape, DType dtype);

// residual may be nullptr; weight, bias, running_mean, running_var as in batch_norm_forward_training.
// Writes output, save_mean[C] and save_invstd[C]. Throws ValueError where batch_norm_relu_fused is false.
// num_batches_tracked: as in batch_norm_forward_training.
void batch_norm_relu_forward_training(const Context& ctx, const BatchNormShape& shape, DType dtype, const void* input,
                                      const void* residual, const void* weight, const void* bias, void* running_mean,
                                      void* running_var, double momentum, double eps, void* output, void* save_mean,
                                      void* save_invstd, std::int64_t* num_batches_tracked = nullptr);

// What the fused forward added to the normalised input besides the weight: its bias (nullptr
// for none) and whether it added a residual. The default (a residual) takes the ReLU's mask
// from the output.
struct BatchNormReluForwardTerms {
  const void* bias = nullptr;
  bool residual = true;
};

// Gradients from grad_output of the fused forward: `output` is its result (the ReLU's mask comes
// from it), `input` its input. grad_residual (the residual's gradient: grad_output where
// output > 0) and any of grad_input, grad_weight, grad_bias may be nullptr when not wanted.
// Where the forward added no residual (forward.residual false), TuningOptions::bn_relu_mask is
// Input and the device has the kernels (CUDA's 16-bit and channels-last ones), the mask is
// recomputed from `input`, save_mean, save_invstd, weight and forward.bias, bit for bit the
// forward's, and `output` is not read.
void batch_norm_relu_backward_training(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                       const void* grad_output, const void* output, const void* input,
                                       const void* weight, const void* save_mean, const void* save_invstd,
                                       void* grad_input, void* grad_weight, void* grad_bias, void* grad_residual,
                                       const BatchNormReluForwardTerms& forward = {});

}  // namespace sublet::ops
