// The CUDA backend's entries in the kernel tables (ops/*_kernels.h) and its device services.
// Compiled only in CUDA builds; called once by ensure_kernels_registered(). The CUDA kernels take
// the dtype and serve several, so the same function is registered under each dtype it supports;
// registering a dtype here is the promise that the function handles it.
#include <initializer_list>

#include "ops/attention_kernels.h"
#include "ops/batch_norm_kernels.h"
#include "ops/batch_norm_relu_kernels.h"
#include "ops/conv2d_kernels.h"
#include "ops/copy_kernels.h"
#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/batch_norm_cuda.h"
#include "ops/cuda/batch_norm_relu_cuda.h"
#include "ops/cuda/batch_norm_split_cuda.h"
#include "ops/cuda/conv2d_cuda.h"
#include "ops/cuda/copy_cuda.h"
#include "ops/cuda/device_services_cuda.h"
#include "ops/cuda/dropout_cuda.h"
#include "ops/cuda/elementwise_cuda.h"
#include "ops/cuda/cross_entropy_cuda.h"
#include "ops/cuda/embedding_cuda.h"
#include "ops/cuda/gelu_cuda.h"
#include "ops/cuda/layer_norm_cuda.h"
#include "ops/cuda/loss_cuda.h"
#include "ops/cuda/softmax_cuda.h"
#include "ops/cuda/linear_bias_cuda.h"
#include "ops/cuda/linear_gelu_cuda.h"
#include "ops/cuda/matmul_cuda.h"
#include "ops/cuda/multi_tensor_norm_cuda.h"
#include "ops/cuda/optim_update_cuda.h"
#include "ops/cuda/pooling_cuda.h"
#include "ops/cuda/random_cuda.h"
#include "ops/cuda/reduce_cuda.h"
#include "ops/device_services.h"
#include "ops/dropout_kernels.h"
#include "ops/elementwise_kernels.h"
#include "ops/kernel_registration.h"
#include "ops/embedding_kernels.h"
#include "ops/gelu_kernels.h"
#include "ops/layer_norm_kernels.h"
#include "ops/loss_kernels.h"
#include "ops/softmax_kernels.h"
#include "ops/linear_bias_kernels.h"
#include "ops/linear_gelu_kernels.h"
#include "ops/matmul_kernels.h"
#include "ops/multi_tensor_norm_kernels.h"
#include "ops/optim_update_kernels.h"
#include "ops/pooling_kernels.h"
#include "ops/random_kernels.h"
#include "ops/reduce_kernels.h"

namespace sublet::ops {

namespace {

constexpr DeviceType kCuda = DeviceType::CUDA;
constexpr std::initializer_list<DType> kFloating = {DType::Float32, DType::Float64};
constexpr std::initializer_list<DType> kAllDTypes = {DType::Float32, DType::Float64, DType::Int64};
// The 16-bit storage types: kernels load them, compute in float32 and store 16 bits
// (ops/cuda/half_types.cuh). Casts, fills, element-wise ops, reductions, matmul, convolution,
// batch norm, pooling, dropout and the transformer ops (attention among them) take them.
constexpr std::initializer_list<DType> kHalfDTypes = {DType::BFloat16, DType::Float16};

template <class Fn>
void set_for(KernelTable<Fn>& table, std::initializer_list<DType> dtypes, Fn* kernel) {
  for (const DType dtype : dtypes) table.set(kCuda, dtype, kernel);
}

// Channels-last entries: the kernel receives NHWC-dense activations.
constexpr std::initializer_list<DType> kChannelsLastDTypes = {DType::Float32, DType::BFloat16, DType::Float16};
template <class Fn>
void set_channels_last_for(KernelTable<Fn>& table, std::initializer_list<DType> dtypes, Fn* kernel) {
  for (const DType dtype : dtypes) table.set(kCuda, dtype, MemoryFormat::ChannelsLast, kernel);
}

// Batch norm (+ ReLU) of 16-bit NCHW and of channels-last inputs, float32 parameters
// (ops/cuda/batch_norm_split_cuda.h).
void register_split_batch_norm_kernels() {
  set_for(batch_norm_forward_training_kernels(), kHalfDTypes, &cuda::split_batch_norm_forward_training);
  set_for(batch_norm_forward_eval_kernels(), kHalfDTypes, &cuda::split_batch_norm_forward_eval);
  set_for(batch_norm_backward_training_kernels(), kHalfDTypes, &cuda::split_batch_norm_backward_training);
  set_for(batch_norm_backward_eval_kernels(), kHalfDTypes, &cuda::split_batch_norm_backward_eval);
  set_for(batch_norm_relu_forward_kernels(), kHalfDTypes, &cuda::split_batch_norm_relu_forward_training);
  set_for(batch_norm_relu_backward_kernels(), kHalfDTypes, &cuda::split_batch_norm_relu_backward_training);
  set_channels_last_for(batch_norm_forward_training_kernels(), kChannelsLastDTypes,
                        &cuda::split_batch_norm_forward_training);
  set_channels_last_for(batch_norm_forward_eval_kernels(), kChannelsLastDTypes, &cuda::split_batch_norm_forward_eval);
  set_channels_last_for(batch_norm_backward_training_kernels(), kChannelsLastDTypes,
                        &cuda::split_batch_norm_backward_training);
  set_channels_last_for(batch_norm_backward_eval_kernels(), kChannelsLastDTypes,
                        &cuda::split_batch_norm_backward_eval);
  set_channels_last_for(batch_norm_relu_forward_kernels(), kChannelsLastDTypes,
                        &cuda::split_batch_norm_relu_forward_training);
  set_channels_last_for(batch_norm_relu_backward_kernels(), kChannelsLastDTypes,
                        &cuda::split_batch_norm_relu_backward_training);
  // The backward recomputing the ReLU's mask from the input (TuningOptions::bn_relu_mask).
  set_for(batch_norm_relu_backward_input_mask_kernels(), kHalfDTypes,
          &cuda::split_batch_norm_relu_backward_training_input_mask);
  set_channels_last_for(batch_norm_relu_backward_input_mask_kernels(), kChannelsLastDTypes,
                        &cuda::split_batch_norm_relu_backward_training_input_mask);
  // The same forwards counting the batch in their own launches (ops/batch_norm_kernels.h).
  set_for(batch_norm_forward_training_counting_kernels(), kHalfDTypes,
          &cuda::split_batch_norm_forward_training_counting);
  set_for(batch_norm_relu_forward_counting_kernels(), kHalfDTypes,
          &cuda::split_batch_norm_relu_forward_training_counting);
  set_channels_last_for(batch_norm_forward_training_counting_kernels(), kChannelsLastDTypes,
                        &cuda::split_batch_norm_forward_training_counting);
  set_channels_last_for(batch_norm_relu_forward_counting_kernels(), kChannelsLastDTypes,
                        &cuda::split_batch_norm_relu_forward_training_counting);
}

// Max pooling's CUDA functions take one more (defaulted) argument, the index width.
void max_pool2d_forward_auto(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* input,
                             void* output, std::int64_t* indices) {
  cuda::max_pool2d_forward(ctx, shape, dtype, input, output, indices, cuda::PoolIndexing::Auto);
}
void max_pool2d_backward_auto(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* grad_output,
                              const std::int64_t* indices, void* grad_input) {
  cuda::max_pool2d_backward(ctx, shape, dtype, grad_output, indices, grad_input, cuda::PoolIndexing::Auto);
}
void max_pool2d_forward_positions_auto(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* input,
                                       void* output, std::uint8_t* positions) {
  cuda::max_pool2d_forward_positions(ctx, shape, dtype, input, output, positions, cuda::PoolIndexing::Auto);
}
void max_pool2d_backward_positions_auto(const Context& ctx, const Pool2dShape& shape, DType dtype,
                                        const void* grad_output, const std::uint8_t* positions, void* grad_input) {
  cuda::max_pool2d_backward_positions(ctx, shape, dtype, grad_output, positions, grad_input,
                                      cuda::PoolIndexing::Auto);
}

void register_nn_kernels() {
  set_for(conv2d_forward_kernels(), kFloating, &cuda::conv2d_forward);
  set_for(conv2d_backward_input_kernels(), kFloating, &cuda::conv2d_backward_input);
  set_for(conv2d_backward_input_accumulate_kernels(), kFloating, &cuda::conv2d_backward_input_accumulate);
  set_for(conv2d_backward_weight_kernels(), kFloating, &cuda::conv2d_backward_weight);
  // cuDNN with float32 accumulation for 16-bit; channels-last runs cuDNN's NHWC kernels.
  set_for(conv2d_forward_kernels(), kHalfDTypes, &cuda::conv2d_forward);
  set_for(conv2d_backward_input_kernels(), kHalfDTypes, &cuda::conv2d_backward_input);
  set_for(conv2d_backward_input_accumulate_kernels(), kHalfDTypes, &cuda::conv2d_backward_input_accumulate);
  set_for(conv2d_backward_weight_kernels(), kHalfDTypes, &cuda::conv2d_backward_weight);
  for (const DType dtype : {DType::Float32, DType::BFloat16, DType::Float16}) {
    conv2d_forward_kernels().set(kCuda, dtype, MemoryFormat::ChannelsLast, &cuda::conv2d_forward);
    conv2d_backward_input_kernels().set(kCuda, dtype, MemoryFormat::ChannelsLast, &cuda::conv2d_backward_input);
    conv2d_backward_input_accumulate_kernels().set(kCuda, dtype, MemoryFormat::ChannelsLast,
                                                   &cuda::conv2d_backward_input_accumulate);
    conv2d_backward_weight_kernels().set(kCuda, dtype, MemoryFormat::ChannelsLast, &cuda::conv2d_backward_weight);
  }
  set_for(batch_norm_forward_training_kernels(), kFloating, &cuda::batch_norm_forward_training);
  set_for(batch_norm_forward_eval_kernels(), kFloating, &cuda::batch_norm_forward_eval);
  set_for(batch_norm_backward_training_kernels(), kFloating, &cuda::batch_norm_backward_training);
  set_for(batch_norm_backward_eval_kernels(), kFloating, &cuda::batch_norm_backward_eval);
  set_for(batch_norm_relu_forward_kernels(), kFloating, &cuda::batch_norm_relu_forward_training);
  set_for(batch_norm_relu_backward_kernels(), kFloating, &cuda::batch_norm_relu_backward_training);
  set_for(max_pool2d_forward_kernels(), kFloating, &max_pool2d_forward_auto);
  set_for(max_pool2d_backward_kernels(), kFloating, &max_pool2d_backward_auto);
  set_for(max_pool2d_forward_positions_kernels(), kFloating, &max_pool2d_forward_positions_auto);
  set_for(max_pool2d_backward_positions_kernels(), kFloating, &max_pool2d_backward_positions_auto);
  set_for(avg_pool2d_forward_kernels(), kFloating, &cuda::avg_pool2d_forward);
  set_for(avg_pool2d_backward_kernels(), kFloating, &cuda::avg_pool2d_backward);
  set_for(adaptive_avg_pool2d_forward_kernels(), kFloating, &cuda::adaptive_avg_pool2d_forward);
  set_for(adaptive_avg_pool2d_backward_kernels(), kFloating, &cuda::adaptive_avg_pool2d_backward);
  set_for(nll_loss_forward_kernels(), kFloating, &cuda::nll_loss_forward);
  set_for(nll_loss_backward_kernels(), kFloating, &cuda::nll_loss_backward);
  // The transformer ops: float32, float64 and the 16-bit types (float32 math for those).
  for (const auto dtypes : {kFloating, kHalfDTypes}) {
    set_for(log_softmax_forward_kernels(), dtypes, &cuda::log_softmax_forward);
    set_for(log_softmax_backward_kernels(), dtypes, &cuda::log_softmax_backward);
    set_for(softmax_forward_kernels(), dtypes, &cuda::softmax_forward);
    set_for(softmax_backward_kernels(), dtypes, &cuda::softmax_backward);
    set_for(cross_entropy_forward_kernels(), dtypes, &cuda::cross_entropy_forward);
    set_for(cross_entropy_backward_kernels(), dtypes, &cuda::cross_entropy_backward);
    set_for(embedding_forward_kernels(), dtypes, &cuda::embedding_forward);
    set_for(embedding_backward_kernels(), dtypes, &cuda::embedding_backward);
    set_for(layer_norm_forward_kernels(), dtypes, &cuda::layer_norm_forward);
    set_for(layer_norm_backward_kernels(), dtypes, &cuda::layer_norm_backward);
    set_for(layer_norm_fused_forward_kernels(), dtypes, &cuda::layer_norm_fused_forward);
    set_for(layer_norm_fused_backward_kernels(), dtypes, &cuda::layer_norm_fused_backward);
    set_for(gelu_forward_kernels(), dtypes, &cuda::gelu_forward);
    set_for(gelu_backward_kernels(), dtypes, &cuda::gelu_backward);
  }
  set_for(dropout_kernels(), kFloating, &cuda::dropout_apply);
  set_for(dropout_kernels(), kHalfDTypes, &cuda::dropout_apply);
  // float32/float64 through cuBLAS, bfloat16/float16 through the fused kernels.
  set_for(attention_forward_kernels(), kFloating, &cuda::attention_forward);
  set_for(attention_backward_kernels(), kFloating, &cuda::attention_backward);
  set_for(attention_forward_kernels(), kHalfDTypes, &cuda::attention_forward);
  set_for(attention_backward_kernels(), kHalfDTypes, &cuda::attention_backward);
}

void register_tensor_kernels() {
  set_for(unary_kernels(), kAllDTypes, &cuda::unary);
  set_for(binary_kernels(), kAllDTypes, &cuda::binary);
  set_for(ternary_kernels(), kFloating, &cuda::ternary);
  set_for(reduce_sum_kernels(), kAllDTypes, &cuda::reduce_sum);
  set_for(reduce_extremum_kernels(), kAllDTypes, &cuda::reduce_extremum);
  set_for(scatter_add_kernels(), kAllDTypes, &cuda::scatter_add);
  set_for(gather_kernels(), kAllDTypes, &cuda::gather);
  set_for(copy_kernels(), kAllDTypes, &cuda::copy);
  set_for(fill_kernels(), kAllDTypes, &cuda::fill);
  set_for(unary_kernels(), kHalfDTypes, &cuda::unary);
  set_for(binary_kernels(), kHalfDTypes, &cuda::binary);
  set_for(ternary_kernels(), kHalfDTypes, &cuda::ternary);
  set_for(reduce_sum_kernels(), kHalfDTypes, &cuda::reduce_sum);
  set_for(reduce_extremum_kernels(), kHalfDTypes, &cuda::reduce_extremum);
  set_for(scatter_add_kernels(), kHalfDTypes, &cuda::scatter_add);
  set_for(gather_kernels(), kHalfDTypes, &cuda::gather);
  set_for(copy_kernels(), kHalfDTypes, &cuda::copy);
  set_for(fill_kernels(), kHalfDTypes, &cuda::fill);
  set_for(matmul_kernels(), kFloating, &cuda::matmul);
  set_for(matmul_kernels(), kHalfDTypes, &cuda::matmul);  // cuBLAS, float32 accumulation
  set_for(linear_bias_kernels(), kFloating, &cuda::linear_bias);  // cuBLASLt, the bias in the epilogue
  set_for(linear_bias_kernels(), kHalfDTypes, &cuda::linear_bias);
  set_for(linear_weight_grad_float32_kernels(), kHalfDTypes, &cuda::linear_weight_grad_float32);
  // The GELU in GEMM epilogues: 16-bit only (float32 keeps the exact tanh of the GELU kernels).
  set_for(linear_gelu_forward_kernels(), kHalfDTypes, &cuda::linear_gelu_forward);
  set_for(linear_gelu_backward_kernels(), kHalfDTypes, &cuda::linear_gelu_backward);
  set_for(fill_uniform_kernels(), kFloating, &cuda::fill_uniform);
  set_for(fill_normal_kernels(), kFloating, &cuda::fill_normal);
  set_for(sgd_update_kernels(), kFloating, &cuda::sgd_update);
  set_for(adam_update_kernels(), kFloating, &cuda::adam_update);
  set_for(mark_non_finite_kernels(), kFloating, &cuda::mark_non_finite);
  // Keyed by the norm's dtype; the tensors may be float32, float64, bfloat16 or float16.
  set_for(multi_tensor_norm_kernels(), kFloating, &cuda::multi_tensor_norm);
  set_for(multi_tensor_clip_scale_kernels(), kFloating, &cuda::multi_tensor_clip_scale);
}

void register_services() {
  DeviceServices& services = mutable_device_services(kCuda);
  services.copy_bytes = &cuda::copy_bytes;
  services.stream_is_capturing = &cuda::stream_is_capturing;
  services.fork_stream = &cuda::fork_stream;
  services.join_stream = &cuda::join_stream;
  services.profiler_start = &cuda::profiler_start;
  services.profiler_stop = &cuda::profiler_stop;
  services.write_update_scalars = &cuda::write_update_scalars;
}

}  // namespace

// Pooling of 16-bit NCHW and of channels-last float32/bfloat16/float16 (ops/cuda/pooling.cu).
void register_pooling_kernels() {
  set_for(max_pool2d_forward_kernels(), kHalfDTypes, &max_pool2d_forward_auto);
  set_for(max_pool2d_backward_kernels(), kHalfDTypes, &max_pool2d_backward_auto);
  set_for(max_pool2d_forward_positions_kernels(), kHalfDTypes, &max_pool2d_forward_positions_auto);
  set_for(max_pool2d_backward_positions_kernels(), kHalfDTypes, &max_pool2d_backward_positions_auto);
  set_for(avg_pool2d_forward_kernels(), kHalfDTypes, &cuda::avg_pool2d_forward);
  set_for(avg_pool2d_backward_kernels(), kHalfDTypes, &cuda::avg_pool2d_backward);
  set_for(adaptive_avg_pool2d_forward_kernels(), kHalfDTypes, &cuda::adaptive_avg_pool2d_forward);
  set_for(adaptive_avg_pool2d_backward_kernels(), kHalfDTypes, &cuda::adaptive_avg_pool2d_backward);
  set_channels_last_for(max_pool2d_forward_kernels(), kChannelsLastDTypes, &max_pool2d_forward_auto);
  set_channels_last_for(max_pool2d_backward_kernels(), kChannelsLastDTypes, &max_pool2d_backward_auto);
  set_channels_last_for(max_pool2d_forward_positions_kernels(), kChannelsLastDTypes,
                        &max_pool2d_forward_positions_auto);
  set_channels_last_for(max_pool2d_backward_positions_kernels(), kChannelsLastDTypes,
                        &max_pool2d_backward_positions_auto);
  set_channels_last_for(avg_pool2d_forward_kernels(), kChannelsLastDTypes, &cuda::avg_pool2d_forward);
  set_channels_last_for(avg_pool2d_backward_kernels(), kChannelsLastDTypes, &cuda::avg_pool2d_backward);
  set_channels_last_for(adaptive_avg_pool2d_forward_kernels(), kChannelsLastDTypes,
                        &cuda::adaptive_avg_pool2d_forward);
  set_channels_last_for(adaptive_avg_pool2d_backward_kernels(), kChannelsLastDTypes,
                        &cuda::adaptive_avg_pool2d_backward);
}

void register_cuda_kernels() {
  register_nn_kernels();
  register_split_batch_norm_kernels();
  register_pooling_kernels();
  register_tensor_kernels();
  register_services();
}

}  // namespace sublet::ops
