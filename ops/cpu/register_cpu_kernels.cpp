// The CPU backend's entries in the kernel tables (ops/*_kernels.h): one instantiation of each
// kernel template per element type it supports. Called once by ensure_kernels_registered().
// Kernels already written against the table signature (elementwise, reduce, copy, matmul,
// optimizer updates) register directly; the NN kernels take typed pointers and no context, so
// each gets a small adapter (ops/cpu/nn_kernel_adapters.h) that casts the void pointers to T.
#include <cstdint>

#include "ops/attention_kernels.h"
#include "ops/batch_norm_kernels.h"
#include "ops/batch_norm_relu_kernels.h"
#include "ops/conv2d_kernels.h"
#include "core/half.h"
#include "ops/copy_kernels.h"
#include "ops/cpu/attention_cpu.h"
#include "ops/cpu/copy_cpu.h"
#include "ops/cpu/embedding_cpu.h"
#include "ops/cpu/gelu_cpu.h"
#include "ops/cpu/layer_norm_cpu.h"
#include "ops/cpu/softmax_cpu.h"
#include "ops/cpu/elementwise_cpu.h"
#include "ops/cpu/half_adapters_cpu.h"
#include "ops/cpu/linear_bias_cpu.h"
#include "ops/cpu/matmul_cpu.h"
#include "ops/cpu/multi_tensor_norm_cpu.h"
#include "ops/cpu/nn_kernel_adapters.h"
#include "ops/cpu/optim_update_cpu.h"
#include "ops/cpu/random_cpu.h"
#include "ops/cpu/reduce_cpu.h"
#include "ops/dropout_kernels.h"
#include "ops/elementwise_kernels.h"
#include "ops/embedding_kernels.h"
#include "ops/gelu_kernels.h"
#include "ops/layer_norm_kernels.h"
#include "ops/softmax_kernels.h"
#include "ops/kernel_registration.h"
#include "ops/loss_kernels.h"
#include "ops/linear_bias_kernels.h"
#include "ops/matmul_kernels.h"
#include "ops/multi_tensor_norm_kernels.h"
#include "ops/optim_update_kernels.h"
#include "ops/pooling_kernels.h"
#include "ops/random_kernels.h"
#include "ops/reduce_kernels.h"

namespace sublet::ops {

namespace {

constexpr DeviceType kCpu = DeviceType::CPU;

// Float32 and float64: the NN ops, matmul, optimizer updates, random fills.
template <typename T>
void register_floating() {
  constexpr DType dtype = DTypeOf<T>::value;
  namespace a = cpu::adapters;
  conv2d_forward_kernels().set(kCpu, dtype, &a::conv2d_forward<T>);
  conv2d_backward_input_kernels().set(kCpu, dtype, &a::conv2d_backward_input<T>);
  conv2d_backward_weight_kernels().set(kCpu, dtype, &a::conv2d_backward_weight<T>);
  batch_norm_forward_training_kernels().set(kCpu, dtype, &a::batch_norm_forward_training<T>);
  batch_norm_forward_eval_kernels().set(kCpu, dtype, &a::batch_norm_forward_eval<T>);
  batch_norm_backward_training_kernels().set(kCpu, dtype, &a::batch_norm_backward_training<T>);
  batch_norm_backward_eval_kernels().set(kCpu, dtype, &a::batch_norm_backward_eval<T>);
  batch_norm_relu_forward_kernels().set(kCpu, dtype, &a::batch_norm_relu_forward_training<T>);
  batch_norm_relu_backward_kernels().set(kCpu, dtype, &a::batch_norm_relu_backward_training<T>);
  max_pool2d_forward_kernels().set(kCpu, dtype, &a::max_pool2d_forward<T>);
  max_pool2d_backward_kernels().set(kCpu, dtype, &a::max_pool2d_backward<T>);
  avg_pool2d_forward_kernels().set(kCpu, dtype, &a::avg_pool2d_forward<T>);
  avg_pool2d_backward_kernels().set(kCpu, dtype, &a::avg_pool2d_backward<T>);
  adaptive_avg_pool2d_forward_kernels().set(kCpu, dtype, &a::adaptive_avg_pool2d_forward<T>);
  adaptive_avg_pool2d_backward_kernels().set(kCpu, dtype, &a::adaptive_avg_pool2d_backward<T>);
  log_softmax_forward_kernels().set(kCpu, dtype, &a::log_softmax_forward<T>);
  log_softmax_backward_kernels().set(kCpu, dtype, &a::log_softmax_backward<T>);
  nll_loss_forward_kernels().set(kCpu, dtype, &a::nll_loss_forward<T>);
  nll_loss_backward_kernels().set(kCpu, dtype, &a::nll_loss_backward<T>);
  cross_entropy_forward_kernels().set(kCpu, dtype, &a::cross_entropy_forward<T>);
  cross_entropy_backward_kernels().set(kCpu, dtype, &a::cross_entropy_backward<T>);
  dropout_kernels().set(kCpu, dtype, &a::dropout<T>);
  // The transformer ops' CPU kernels take the table signature directly.
  embedding_forward_kernels().set(kCpu, dtype, &cpu::embedding_forward<T>);
  embedding_backward_kernels().set(kCpu, dtype, &cpu::embedding_backward<T>);
  layer_norm_forward_kernels().set(kCpu, dtype, &cpu::layer_norm_forward<T>);
  layer_norm_backward_kernels().set(kCpu, dtype, &cpu::layer_norm_backward<T>);
  gelu_forward_kernels().set(kCpu, dtype, &cpu::gelu_forward<T>);
  gelu_backward_kernels().set(kCpu, dtype, &cpu::gelu_backward<T>);
  softmax_forward_kernels().set(kCpu, dtype, &cpu::softmax_forward<T>);
  softmax_backward_kernels().set(kCpu, dtype, &cpu::softmax_backward<T>);
  attention_forward_kernels().set(kCpu, dtype, &cpu::attention_forward<T>);
  attention_backward_kernels().set(kCpu, dtype, &cpu::attention_backward<T>);
  // The random fills draw with the dtype-taking host generator that the CUDA fills share.
  fill_uniform_kernels().set(kCpu, dtype, &a::fill_uniform<T>);
  fill_normal_kernels().set(kCpu, dtype, &a::fill_normal<T>);

  ternary_kernels().set(kCpu, dtype, &cpu::ternary<T>);
  matmul_kernels().set(kCpu, dtype, &cpu::matmul<T>);
  linear_bias_kernels().set(kCpu, dtype, &cpu::linear_bias<T>);
  sgd_update_kernels().set(kCpu, dtype, &cpu::sgd_update<T>);
  adam_update_kernels().set(kCpu, dtype, &cpu::adam_update<T>);
  mark_non_finite_kernels().set(kCpu, dtype, &cpu::mark_non_finite<T>);
  // Keyed by the norm's dtype; the tensors may be float32, float64, bfloat16 or float16.
  multi_tensor_norm_kernels().set(kCpu, dtype, &cpu::multi_tensor_norm<T>);
  multi_tensor_clip_scale_kernels().set(kCpu, dtype, &cpu::multi_tensor_clip_scale<T>);
}

// Float32, float64 and int64: elementwise, reductions, copies and fills.
template <typename T>
void register_all_dtypes() {
  constexpr DType dtype = DTypeOf<T>::value;
  unary_kernels().set(kCpu, dtype, &cpu::unary<T>);
  binary_kernels().set(kCpu, dtype, &cpu::binary<T>);
  reduce_sum_kernels().set(kCpu, dtype, &cpu::reduce_sum<T>);
  reduce_extremum_kernels().set(kCpu, dtype, &cpu::reduce_extremum<T>);
  scatter_add_kernels().set(kCpu, dtype, &cpu::scatter_add<T>);
  gather_kernels().set(kCpu, dtype, &cpu::gather<T>);
  copy_kernels().set(kCpu, dtype, &cpu::copy<T>);
  fill_kernels().set(kCpu, dtype, &cpu::fill<T>);
}

}  // namespace

void register_cpu_kernels() {
  register_floating<float>();
  register_floating<double>();
  register_all_dtypes<float>();
  register_all_dtypes<double>();
  register_all_dtypes<std::int64_t>();
  // bfloat16, float16 and uint8 are storage types on the CPU: casts to and from them, and fills.
  copy_kernels().set(kCpu, DType::BFloat16, &cpu::copy<BFloat16>);
  fill_kernels().set(kCpu, DType::BFloat16, &cpu::fill<BFloat16>);
  copy_kernels().set(kCpu, DType::Float16, &cpu::copy<Float16>);
  fill_kernels().set(kCpu, DType::Float16, &cpu::fill<Float16>);
  // Their arithmetic (element-wise, reductions, matmul, conv2d) widens to the float32 kernels.
  cpu::register_half_adapters();
  copy_kernels().set(kCpu, DType::UInt8, &cpu::copy<std::uint8_t>);
  fill_kernels().set(kCpu, DType::UInt8, &cpu::fill<std::uint8_t>);
  // The CPU has no device services: host copies are memcpy in ops/copy.cpp, nothing captures.
}

}  // namespace sublet::ops
