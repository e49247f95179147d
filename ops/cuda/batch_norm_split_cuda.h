#pragma once
// Batch norm (and batch norm + residual + ReLU) with the per-channel reductions split over many
// blocks (ops/cuda/batch_norm_split.cu): the CUDA kernels for 16-bit NCHW inputs and for
// channels-last (NHWC) inputs of float32, bfloat16 and float16. Same arguments as
// ops/batch_norm.h and ops/batch_norm_relu.h (device pointers, already validated), with the
// batch-norm dtype rule's parameters: input, output, grad_output, grad_input, residual and
// grad_residual are of `dtype`; weight, bias, running_mean/var, save_mean/save_invstd,
// grad_weight and grad_bias are float32 whatever `dtype` is. The layout is shape.format.
#include "ops/batch_norm.h"

namespace sublet::ops::cuda {

// Whether training on this shape runs in one launch each way (ops/cuda/batch_norm_small_channels_last.cuh:
// channels-last, at most 2,048 rows, channels in whole 16-byte packs), given 16-byte-aligned
// buffers; else the three launches each way.
bool split_batch_norm_takes_one_launch(const BatchNormShape& shape, DType dtype);

// Which (dtype, layout) pairs these kernels take: bfloat16/float16 in both layouts, float32
// channels-last. Others throw DTypeError naming what they take.
void split_batch_norm_forward_training(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                       const void* input, const void* weight, const void* bias, void* running_mean,
                                       void* running_var, double momentum, double eps, void* output,
                                       void* save_mean, void* save_invstd);
// The two training forwards also counting the batch in their own launches (*num_batches_tracked
// += 1, an int64 on the device; ops/batch_norm_kernels.h's counting tables).
void split_batch_norm_forward_training_counting(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                                const void* input, const void* weight, const void* bias,
                                                void* running_mean, void* running_var, double momentum, double eps,
                                                void* output, void* save_mean, void* save_invstd,
                                                std::int64_t* num_batches_tracked);
void split_batch_norm_relu_forward_training_counting(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                                     const void* input, const void* residual, const void* weight,
                                                     const void* bias, void* running_mean, void* running_var,
                                                     double momentum, double eps, void* output, void* save_mean,
                                                     void* save_invstd, std::int64_t* num_batches_tracked);
void split_batch_norm_forward_eval(const Context& ctx, const BatchNormShape& shape, DType dtype, const void* input,
                                   const void* weight, const void* bias, const void* running_mean,
                                   const void* running_var, double eps, void* output);
void split_batch_norm_backward_training(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                        const void* grad_output, const void* input, const void* weight,
                                        const void* save_mean, const void* save_invstd, void* grad_input,
                                        void* grad_weight, void* grad_bias);
void split_batch_norm_backward_eval(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                    const void* grad_output, const void* input, const void* weight,
                                    const void* running_mean, const void* running_var, double eps, void* grad_input,
                                    void* grad_weight, void* grad_bias);
void split_batch_norm_relu_forward_training(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                            const void* input, const void* residual, const void* weight,
                                            const void* bias, void* running_mean, void* running_var, double momentum,
                                            double eps, void* output, void* save_mean, void* save_invstd);
void split_batch_norm_relu_backward_training(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                             const void* grad_output, const void* output, const void* input,
                                             const void* weight, const void* save_mean, const void* save_invstd,
                                             void* grad_input, void* grad_weight, void* grad_bias,
                                             void* grad_residual);
// The same gradients of a forward without a residual whose bias was `bias`, the ReLU's mask
// recomputed from the input and the forward's coefficients instead of read from `output` (which
// is not read; its alignment picks the kernels as above, so both ways give the same bits).
void split_batch_norm_relu_backward_training_input_mask(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                                        const void* grad_output, const void* output,
                                                        const void* input, const void* weight, const void* bias,
                                                        const void* save_mean, const void* save_invstd,
                                                        void* grad_input, void* grad_weight, void* grad_bias);

}  // namespace sublet::ops::cuda
