#pragma once
// Adapters from the kernel-table signatures (ops/*_kernels.h: context, dtype, void pointers) to
// the CPU NN kernels, which are templates on typed pointers. Included only by
// ops/cpu/register_cpu_kernels.cpp, which registers adapter<T> under DTypeOf<T>: the cast is
// right by construction, and the front files never see an element type.
#include <cstdint>
#include <random>

#include "ops/cpu/batch_norm_cpu.h"
#include "ops/cpu/batch_norm_relu_cpu.h"
#include "ops/cpu/conv2d_cpu.h"
#include "ops/cpu/dropout_cpu.h"
#include "ops/cpu/loss_cpu.h"
#include "ops/cpu/pooling_cpu.h"
#include "ops/cpu/random_cpu.h"

namespace sublet::ops::cpu::adapters {

template <typename T>
const T* in(const void* p) { return static_cast<const T*>(p); }
template <typename T>
T* out(void* p) { return static_cast<T*>(p); }

// conv2d (ops/conv2d_kernels.h)
template <typename T>
void conv2d_forward(const Context& ctx, const Conv2dShape& s, DType, const void* input, const void* weight,
                    const void* bias, void* output) {
  cpu::conv2d_forward<T>(ctx, s, in<T>(input), in<T>(weight), in<T>(bias), out<T>(output));
}
template <typename T>
void conv2d_backward_input(const Context& ctx, const Conv2dShape& s, DType, const void* grad_output,
                           const void* weight, void* grad_input) {
  cpu::conv2d_backward_input<T>(ctx, s, in<T>(grad_output), in<T>(weight), out<T>(grad_input));
}
template <typename T>
void conv2d_backward_weight(const Context& ctx, const Conv2dShape& s, DType, const void* grad_output,
                            const void* input, void* grad_weight, void* grad_bias) {
  cpu::conv2d_backward_weight<T>(ctx, s, in<T>(grad_output), in<T>(input), out<T>(grad_weight), out<T>(grad_bias));
}

// batch norm (ops/batch_norm_kernels.h)
template <typename T>
void batch_norm_forward_training(const Context&, const BatchNormShape& s, DType, const void* input,
                                 const void* weight, const void* bias, void* running_mean, void* running_var,
                                 double momentum, double eps, void* output, void* save_mean, void* save_invstd) {
  cpu::batch_norm_forward_training<T>(s, in<T>(input), in<T>(weight), in<T>(bias), out<T>(running_mean),
                                      out<T>(running_var), momentum, eps, out<T>(output), out<T>(save_mean),
                                      out<T>(save_invstd));
}
template <typename T>
void batch_norm_forward_eval(const Context&, const BatchNormShape& s, DType, const void* input, const void* weight,
                             const void* bias, const void* running_mean, const void* running_var, double eps,
                             void* output) {
  cpu::batch_norm_forward_eval<T>(s, in<T>(input), in<T>(weight), in<T>(bias), in<T>(running_mean),
                                  in<T>(running_var), eps, out<T>(output));
}
template <typename T>
void batch_norm_backward_training(const Context&, const BatchNormShape& s, DType, const void* grad_output,
                                  const void* input, const void* weight, const void* save_mean,
                                  const void* save_invstd, void* grad_input, void* grad_weight, void* grad_bias) {
  cpu::batch_norm_backward_training<T>(s, in<T>(grad_output), in<T>(input), in<T>(weight), in<T>(save_mean),
                                       in<T>(save_invstd), out<T>(grad_input), out<T>(grad_weight),
                                       out<T>(grad_bias));
}
template <typename T>
void batch_norm_backward_eval(const Context&, const BatchNormShape& s, DType, const void* grad_output,
                              const void* input, const void* weight, const void* running_mean,
                              const void* running_var, double eps, void* grad_input, void* grad_weight,
                              void* grad_bias) {
  cpu::batch_norm_backward_eval<T>(s, in<T>(grad_output), in<T>(input), in<T>(weight), in<T>(running_mean),
                                   in<T>(running_var), eps, out<T>(grad_input), out<T>(grad_weight),
                                   out<T>(grad_bias));
}

// fused batch norm + ReLU (ops/batch_norm_relu_kernels.h)
template <typename T>
void batch_norm_relu_forward_training(const Context&, const BatchNormShape& s, DType, const void* input,
                                      const void* residual, const void* weight, const void* bias,
                                      void* running_mean, void* running_var, double momentum, double eps,
                                      void* output, void* save_mean, void* save_invstd) {
  cpu::batch_norm_relu_forward_training<T>(s, in<T>(input), in<T>(residual), in<T>(weight), in<T>(bias),
                                           out<T>(running_mean), out<T>(running_var), momentum, eps,
                                           out<T>(output), out<T>(save_mean), out<T>(save_invstd));
}
template <typename T>
void batch_norm_relu_backward_training(const Context&, const BatchNormShape& s, DType, const void* grad_output,
                                       const void* output, const void* input, const void* weight,
                                       const void* save_mean, const void* save_invstd, void* grad_input,
                                       void* grad_weight, void* grad_bias, void* grad_residual) {
  cpu::batch_norm_relu_backward_training<T>(s, in<T>(grad_output), in<T>(output), in<T>(input), in<T>(weight),
                                            in<T>(save_mean), in<T>(save_invstd), out<T>(grad_input),
                                            out<T>(grad_weight), out<T>(grad_bias), out<T>(grad_residual));
}

// pooling (ops/pooling_kernels.h)
template <typename T>
void max_pool2d_forward(const Context&, const Pool2dShape& s, DType, const void* input, void* output,
                        std::int64_t* indices) {
  cpu::max_pool2d_forward<T>(s, in<T>(input), out<T>(output), indices);
}
template <typename T>
void max_pool2d_backward(const Context&, const Pool2dShape& s, DType, const void* grad_output,
                         const std::int64_t* indices, void* grad_input) {
  cpu::max_pool2d_backward<T>(s, in<T>(grad_output), indices, out<T>(grad_input));
}
template <typename T>
void avg_pool2d_forward(const Context&, const Pool2dShape& s, DType, const void* input, void* output,
                        bool count_include_pad) {
  cpu::avg_pool2d_forward<T>(s, in<T>(input), out<T>(output), count_include_pad);
}
template <typename T>
void avg_pool2d_backward(const Context&, const Pool2dShape& s, DType, const void* grad_output, void* grad_input,
                         bool count_include_pad) {
  cpu::avg_pool2d_backward<T>(s, in<T>(grad_output), out<T>(grad_input), count_include_pad);
}
template <typename T>
void adaptive_avg_pool2d_forward(const Context&, const AdaptivePool2dShape& s, DType, const void* input,
                                 void* output) {
  cpu::adaptive_avg_pool2d_forward<T>(s, in<T>(input), out<T>(output));
}
template <typename T>
void adaptive_avg_pool2d_backward(const Context&, const AdaptivePool2dShape& s, DType, const void* grad_output,
                                  void* grad_input) {
  cpu::adaptive_avg_pool2d_backward<T>(s, in<T>(grad_output), out<T>(grad_input));
}

// losses (ops/loss_kernels.h)
template <typename T>
void log_softmax_forward(const Context&, const ClassScoresShape& s, DType, const void* input, void* output) {
  cpu::log_softmax_forward<T>(s, in<T>(input), out<T>(output));
}
template <typename T>
void log_softmax_backward(const Context&, const ClassScoresShape& s, DType, const void* grad_output,
                          const void* output, void* grad_input) {
  cpu::log_softmax_backward<T>(s, in<T>(grad_output), in<T>(output), out<T>(grad_input));
}
template <typename T>
void nll_loss_forward(const Context&, const ClassScoresShape& s, DType, const void* log_probs,
                      const std::int64_t* targets, void* loss) {
  cpu::nll_loss_forward<T>(s, in<T>(log_probs), targets, out<T>(loss));
}
template <typename T>
void nll_loss_backward(const Context&, const ClassScoresShape& s, DType, const void* grad_loss,
                       const std::int64_t* targets, void* grad_log_probs) {
  cpu::nll_loss_backward<T>(s, in<T>(grad_loss), targets, out<T>(grad_log_probs));
}
template <typename T>
void cross_entropy_forward(const Context&, const ClassScoresShape& s, DType, const void* logits,
                           const std::int64_t* targets, const CrossEntropyParams& params, void* loss,
                           void* row_log_sum_exp) {
  cpu::cross_entropy_forward<T>(s, in<T>(logits), targets, params, out<T>(loss), out<T>(row_log_sum_exp));
}
template <typename T>
void cross_entropy_backward(const Context&, const ClassScoresShape& s, DType, const void* grad_loss,
                            const void* logits, const std::int64_t* targets, const void* row_log_sum_exp,
                            const CrossEntropyParams& params, void* grad_logits) {
  cpu::cross_entropy_backward<T>(s, in<T>(grad_loss), in<T>(logits), targets, in<T>(row_log_sum_exp), params,
                                 out<T>(grad_logits));
}

// dropout (ops/dropout_kernels.h)
template <typename T>
void dropout(const Context&, std::int64_t numel, DType, const void* input, double p, std::uint64_t seed,
             std::uint64_t offset, void* output) {
  cpu::dropout_apply<T>(numel, in<T>(input), p, seed, offset, out<T>(output));
}

// random fills (ops/random_kernels.h): the host generator takes the dtype itself, because the
// CUDA fills call it too (ops/cuda/random_cuda.cpp).
template <typename T>
void fill_uniform(const Context&, DType dtype, void* dst, std::int64_t count, double low, double high,
                  std::mt19937_64& engine) {
  cpu::fill_uniform(dtype, dst, count, low, high, engine);
}
template <typename T>
void fill_normal(const Context&, DType dtype, void* dst, std::int64_t count, double mean, double stddev,
                 std::mt19937_64& engine) {
  cpu::fill_normal(dtype, dst, count, mean, stddev, engine);
}

}  // namespace sublet::ops::cpu::adapters
