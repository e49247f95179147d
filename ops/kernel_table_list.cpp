#include "ops/kernel_table_list.h"

#include <array>

#include "ops/attention_kernels.h"
#include "ops/batch_norm_kernels.h"
#include "ops/batch_norm_relu_kernels.h"
#include "ops/conv2d_kernels.h"
#include "ops/copy_kernels.h"
#include "ops/dropout_kernels.h"
#include "ops/elementwise_kernels.h"
#include "ops/embedding_kernels.h"
#include "ops/gelu_kernels.h"
#include "ops/layer_norm_kernels.h"
#include "ops/softmax_kernels.h"
#include "ops/loss_kernels.h"
#include "ops/linear_bias_kernels.h"
#include "ops/linear_gelu_kernels.h"
#include "ops/matmul_kernels.h"
#include "ops/multi_tensor_norm_kernels.h"
#include "ops/optim_update_kernels.h"
#include "ops/pooling_kernels.h"
#include "ops/random_kernels.h"
#include "ops/reduce_kernels.h"

namespace sublet::ops {

std::span<const NamedKernelTable> all_kernel_tables() {
  static const auto tables = std::to_array<NamedKernelTable>({
      {"batch_norm_forward_training", &batch_norm_forward_training_kernels(), true},
      {"batch_norm_forward_eval", &batch_norm_forward_eval_kernels(), true},
      {"batch_norm_backward_training", &batch_norm_backward_training_kernels(), true},
      {"batch_norm_backward_eval", &batch_norm_backward_eval_kernels(), true},
      {"batch_norm_relu_forward", &batch_norm_relu_forward_kernels(), true},
      {"batch_norm_relu_backward", &batch_norm_relu_backward_kernels(), true},
      {"batch_norm_relu_backward_input_mask", &batch_norm_relu_backward_input_mask_kernels(), false},
      {"conv2d_forward", &conv2d_forward_kernels(), true},
      {"conv2d_backward_input", &conv2d_backward_input_kernels(), true},
      {"conv2d_backward_input_accumulate", &conv2d_backward_input_accumulate_kernels(), false},
      {"conv2d_backward_weight", &conv2d_backward_weight_kernels(), true},
      {"copy", &copy_kernels(), true},
      {"fill", &fill_kernels(), true},
      {"dropout", &dropout_kernels(), true},
      {"unary", &unary_kernels(), true},
      {"binary", &binary_kernels(), true},
      {"ternary", &ternary_kernels(), true},
      {"log_softmax_forward", &log_softmax_forward_kernels(), true},
      {"log_softmax_backward", &log_softmax_backward_kernels(), true},
      {"nll_loss_forward", &nll_loss_forward_kernels(), true},
      {"nll_loss_backward", &nll_loss_backward_kernels(), true},
      {"cross_entropy_forward", &cross_entropy_forward_kernels(), true},
      {"cross_entropy_backward", &cross_entropy_backward_kernels(), true},
      {"matmul", &matmul_kernels(), true},
      {"linear_bias", &linear_bias_kernels(), true},
      {"linear_weight_grad_float32", &linear_weight_grad_float32_kernels(), false},
      {"linear_gelu_forward", &linear_gelu_forward_kernels(), false},
      {"linear_gelu_backward", &linear_gelu_backward_kernels(), false},
      {"sgd_update", &sgd_update_kernels(), true},
      {"adam_update", &adam_update_kernels(), true},
      {"mark_non_finite", &mark_non_finite_kernels(), true},
      {"multi_tensor_norm", &multi_tensor_norm_kernels(), true},
      {"multi_tensor_clip_scale", &multi_tensor_clip_scale_kernels(), true},
      {"max_pool2d_forward", &max_pool2d_forward_kernels(), true},
      {"max_pool2d_backward", &max_pool2d_backward_kernels(), true},
      {"max_pool2d_forward_positions", &max_pool2d_forward_positions_kernels(), false},
      {"max_pool2d_backward_positions", &max_pool2d_backward_positions_kernels(), false},
      {"avg_pool2d_forward", &avg_pool2d_forward_kernels(), true},
      {"avg_pool2d_backward", &avg_pool2d_backward_kernels(), true},
      {"adaptive_avg_pool2d_forward", &adaptive_avg_pool2d_forward_kernels(), true},
      {"adaptive_avg_pool2d_backward", &adaptive_avg_pool2d_backward_kernels(), true},
      {"fill_uniform", &fill_uniform_kernels(), true},
      {"fill_normal", &fill_normal_kernels(), true},
      {"reduce_sum", &reduce_sum_kernels(), true},
      {"reduce_extremum", &reduce_extremum_kernels(), true},
      {"scatter_add", &scatter_add_kernels(), true},
      {"gather", &gather_kernels(), true},
      {"embedding_forward", &embedding_forward_kernels(), true},
      {"embedding_backward", &embedding_backward_kernels(), true},
      {"layer_norm_forward", &layer_norm_forward_kernels(), true},
      {"layer_norm_backward", &layer_norm_backward_kernels(), true},
      {"layer_norm_fused_forward", &layer_norm_fused_forward_kernels(), false},
      {"layer_norm_fused_backward", &layer_norm_fused_backward_kernels(), false},
      {"gelu_forward", &gelu_forward_kernels(), true},
      {"gelu_backward", &gelu_backward_kernels(), true},
      {"softmax_forward", &softmax_forward_kernels(), true},
      {"softmax_backward", &softmax_backward_kernels(), true},
      {"attention_forward", &attention_forward_kernels(), true},
      {"attention_backward", &attention_backward_kernels(), true},
  });
  return tables;
}

}  // namespace sublet::ops
