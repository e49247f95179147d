#include "ops/batch_norm_relu.h"

#include <string>

#include "core/errors.h"
#include "core/tuning.h"
#include "ops/batch_norm_relu_kernels.h"

namespace sublet::ops {

namespace {

// The CUDA float32/float64 NCHW kernels (ops/cuda/batch_norm_relu.cu) hold a channel in one
// block's registers: at most kFusedBatchNormMaxPerChannel values. The 16-bit and channels-last
// ones (ops/cuda/batch_norm_split.cu) split a channel over many blocks and take any size; the CPU
// kernels (ops/cpu/batch_norm_relu_cpu.cpp) loop over a channel and take any size too.
bool one_block_per_channel(const Context& ctx, const BatchNormShape& shape, DType dtype) {
  return ctx.device.type == DeviceType::CUDA && shape.format == MemoryFormat::Contiguous &&
         (dtype == DType::Float32 || dtype == DType::Float64);
}

void require_fused(const Context& ctx, const BatchNormShape& shape, DType dtype) {
  if (!batch_norm_relu_fused(ctx, shape, dtype)) {
    const std::string where = batch_norm_relu_forward_kernels().describe();
    throw ValueError("batch_norm_relu: the fused kernels need a device and dtype that have them (" +
                     (where.empty() ? std::string("none in this build") : where) + ") and, for float32/float64 " +
                     "NCHW on CUDA, at most " + std::to_string(kFusedBatchNormMaxPerChannel) + " values per channel; got " +
                     ctx.device.str() + ", " + dtype_name(dtype) +
                     (shape.format == MemoryFormat::ChannelsLast ? " channels-last" : "") + ", " +
                     std::to_string(shape.batch * shape.spatial()) + " values per channel");
  }
}

}  // namespace

// Fused where a backend registered the kernels for this device, dtype and layout (CUDA; the CPU
// for float32/float64 NCHW) and, for the one-block-per-channel kernels, the channels fit.
bool batch_norm_relu_fused(const Context& ctx, const BatchNormShape& shape, DType dtype) {
  return (!one_block_per_channel(ctx, shape, dtype) || shape.batch * shape.spatial() <= kFusedBatchNormMaxPerChannel) &&
         batch_norm_relu_forward_kernels().find(ctx.device.type, dtype, shape.format) != nullptr &&
         batch_norm_relu_backward_kernels().find(ctx.device.type, dtype, shape.format) != nullptr;
}

void batch_norm_relu_forward_training(const Context& ctx, const BatchNormShape& shape, DType dtype, const void* input,
                                      const void* residual, const void* weight, const void* bias, void* running_mean,
                                      void* running_var, double momentum, double eps, void* output, void* save_mean,
                                      void* save_invstd, std::int64_t* num_batches_tracked) {
  shape.validate(true);
  require_fused(ctx, shape, dtype);
  detail::check_eps("batch_norm_relu", eps);
  detail::check_momentum("batch_norm_relu", momentum);
  if (num_batches_tracked != nullptr) {
    if (auto* counting = batch_norm_relu_forward_counting_kernels().find(ctx.device.type, dtype, shape.format)) {
      counting(ctx, shape, dtype, input, residual, weight, bias, running_mean, running_var, momentum, eps, output,
               save_mean, save_invstd, num_batches_tracked);
      return;
    }
  }
  batch_norm_relu_forward_kernels().get("batch_norm_relu", ctx.device, dtype, shape.format)(
      ctx, shape, dtype, input, residual, weight, bias, running_mean, running_var, momentum, eps, output, save_mean,
      save_invstd);
  if (num_batches_tracked != nullptr) detail::count_batch_apart(ctx, num_batches_tracked);
}

void batch_norm_relu_backward_training(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                       const void* grad_output, const void* output, const void* input,
                                       const void* weight, const void* save_mean, const void* save_invstd,
                                       void* grad_input, void* grad_weight, void* grad_bias, void* grad_residual,
                                       const BatchNormReluForwardTerms& forward) {
  shape.validate(true);
  require_fused(ctx, shape, dtype);
  // Without a residual the mask follows from the input and the forward's coefficients: one read
  // of the output fewer per pass. There is no residual gradient to write then.
  if (!forward.residual && grad_residual == nullptr && tuning().bn_relu_mask == BnReluMask::Input) {
    if (auto* from_input = batch_norm_relu_backward_input_mask_kernels().find(ctx.device.type, dtype, shape.format)) {
      from_input(ctx, shape, dtype, grad_output, output, input, weight, forward.bias, save_mean, save_invstd,
                 grad_input, grad_weight, grad_bias);
      return;
    }
  }
  batch_norm_relu_backward_kernels().get("batch_norm_relu", ctx.device, dtype, shape.format)(
      ctx, shape, dtype, grad_output, output, input, weight, save_mean, save_invstd, grad_input, grad_weight,
      grad_bias, grad_residual);
}

}  // namespace sublet::ops
