// Batch norm on cuDNN's legacy API (cudnnBatchNormalization*, present in cuDNN 9.x), spatial
// mode (statistics over N, H, W per channel), with the semantics of ops/batch_norm.h:
// - save_invstd is cuDNN's resultSaveInvVariance, 1/sqrt(var_biased + eps), exactly what the
//   CPU kernel saves and both backward kernels expect;
// - running_var moves towards the *unbiased* batch variance (cuDNN applies N/(N-1), as
//   PyTorch relies on), running = (1 - momentum) * running + momentum * batch statistic;
// - cuDNN needs every parameter pointer, so a missing weight/bias (no affine transform) is a
//   workspace of ones/zeros, a missing running buffer or gradient a scratch workspace.
#include "ops/cuda/batch_norm_cuda.h"

#include <optional>
#include <string>

#include "core/errors.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/cudnn_descriptors.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/handles.h"

namespace sublet::ops::cuda {
namespace {

constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;

struct BatchNormDescriptors {
  TensorDescriptor data;        // x, y, dy, dx: [N, C, H, W]
  TensorDescriptor parameters;  // scale, bias, means, variances: derived [1, C, 1, 1]

  BatchNormDescriptors(const BatchNormShape& s, DType dtype)
      : data(dtype, cudnn_int(s.batch, "batch_norm", "batch"), cudnn_int(s.channels, "batch_norm", "channels"),
             cudnn_int(s.height, "batch_norm", "height"), cudnn_int(s.width, "batch_norm", "width")) {
    cudnn_int(s.numel(), "batch_norm", "tensor size");
    SUBLET_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(parameters.get(), data.get(), kMode));
  }
};

// A per-channel buffer: the caller's pointer, or a workspace filled with `value` when absent.
class ChannelBuffer {
 public:
  ChannelBuffer(const Context& ctx, cudnnHandle_t handle, const BatchNormDescriptors& d, const BatchNormShape& s,
                DType dtype, const void* given, double value) {
    if (given != nullptr) {
      ptr_ = const_cast<void*>(given);
      return;
    }
    scratch_ = ctx.workspace(static_cast<std::size_t>(s.channels) * element_size(dtype));
    ptr_ = scratch_.get();
    // cudnnSetTensor reads the value in the tensor's own type.
    const float value_f = static_cast<float>(value);
    const double value_d = value;
    SUBLET_CUDNN_CHECK(cudnnSetTensor(handle, d.parameters.get(), ptr_,
                                      dtype == DType::Float64 ? static_cast<const void*>(&value_d)
                                                              : static_cast<const void*>(&value_f)));
  }
  void* get() const { return ptr_; }

 private:
  memory::ScopedBlock scratch_;
  void* ptr_ = nullptr;
};

// cuDNN's scaling factors are host values of the data's precision (double for double data).
struct Scaling {
  explicit Scaling(DType dtype) : is_double(dtype == DType::Float64) {}
  const void* one() const { return is_double ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f); }
  const void* zero() const {
    return is_double ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
  }
  bool is_double;
  float one_f = 1, zero_f = 0;
  double one_d = 1, zero_d = 0;
};

void require_float(DType dtype) {
  if (dtype != DType::Float32 && dtype != DType::Float64) {
    throw DTypeError(std::string("batch_norm: expected float32 or float64, got ") + dtype_name(dtype));
  }
}

// cuDNN ignores epsilon when the saved statistics are passed to the backward call, but rejects
// values below its minimum: this one is only ever used to satisfy that check.
constexpr double kBackwardEpsilonUnused = 1e-5;

}  // namespace

void batch_norm_forward_training(const Context& ctx, const BatchNormShape& s, DType dtype, const void* input,
                                 const void* weight, const void* bias, void* running_mean, void* running_var,
                                 double momentum, double eps, void* output, void* save_mean, void* save_invstd) {
  require_float(dtype);
  if (eps < CUDNN_BN_MIN_EPSILON) {
    throw ValueError("batch_norm: cuDNN needs eps >= " + std::to_string(CUDNN_BN_MIN_EPSILON) + ", got " +
                     std::to_string(eps));
  }
  memory::CudaDeviceGuard device(ctx.device);
  cudnnHandle_t handle = cudnn_for(ctx);
  BatchNormDescriptors d(s, dtype);
  const ChannelBuffer scale(ctx, handle, d, s, dtype, weight, 1.0);
  const ChannelBuffer shift(ctx, handle, d, s, dtype, bias, 0.0);
  // cuDNN updates both running buffers or neither: a lone one gets a scratch partner.
  const bool update_running = running_mean != nullptr || running_var != nullptr;
  std::optional<ChannelBuffer> mean_partner, var_partner;
  if (update_running && running_mean == nullptr) mean_partner.emplace(ctx, handle, d, s, dtype, nullptr, 0.0);
  if (update_running && running_var == nullptr) var_partner.emplace(ctx, handle, d, s, dtype, nullptr, 1.0);
  void* mean_ptr = running_mean != nullptr ? running_mean : (mean_partner ? mean_partner->get() : nullptr);
  void* var_ptr = running_var != nullptr ? running_var : (var_partner ? var_partner->get() : nullptr);
  const Scaling scaling(dtype);
  SUBLET_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      handle, kMode, scaling.one(), scaling.zero(), d.data.get(), input, d.data.get(), output, d.parameters.get(),
      scale.get(), shift.get(), momentum, mean_ptr, var_ptr, eps, save_mean, save_invstd));
}

void batch_norm_forward_eval(const Context& ctx, const BatchNormShape& s, DType dtype, const void* input,
                             const void* weight, const void* bias, const void* running_mean,
                             const void* running_var, double eps, void* output) {
  require_float(dtype);
  if (eps < CUDNN_BN_MIN_EPSILON) {
    throw ValueError("batch_norm: cuDNN needs eps >= " + std::to_string(CUDNN_BN_MIN_EPSILON) + ", got " +
                     std::to_string(eps));
  }
  memory::CudaDeviceGuard device(ctx.device);
  cudnnHandle_t handle = cudnn_for(ctx);
  BatchNormDescriptors d(s, dtype);
  const ChannelBuffer scale(ctx, handle, d, s, dtype, weight, 1.0);
  const ChannelBuffer shift(ctx, handle, d, s, dtype, bias, 0.0);
  const Scaling scaling(dtype);
  SUBLET_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
      handle, kMode, scaling.one(), scaling.zero(), d.data.get(), input, d.data.get(), output, d.parameters.get(),
      scale.get(), shift.get(), running_mean, running_var, eps));
}

void batch_norm_backward_training(const Context& ctx, const BatchNormShape& s, DType dtype,
                                  const void* grad_output, const void* input, const void* weight,
                                  const void* save_mean, const void* save_invstd, void* grad_input,
                                  void* grad_weight, void* grad_bias) {
  require_float(dtype);
  if (grad_input == nullptr && grad_weight == nullptr && grad_bias == nullptr) return;
  memory::CudaDeviceGuard device(ctx.device);
  cudnnHandle_t handle = cudnn_for(ctx);
  BatchNormDescriptors d(s, dtype);
  const ChannelBuffer scale(ctx, handle, d, s, dtype, weight, 1.0);
  // cuDNN writes all three gradients: the unwanted ones land in scratch workspaces.
  memory::ScopedBlock input_scratch, weight_scratch, bias_scratch;
  const std::size_t channel_bytes = static_cast<std::size_t>(s.channels) * element_size(dtype);
  if (grad_input == nullptr) {
    input_scratch = ctx.workspace(static_cast<std::size_t>(s.numel()) * element_size(dtype));
    grad_input = input_scratch.get();
  }
  if (grad_weight == nullptr) {
    weight_scratch = ctx.workspace(channel_bytes);
    grad_weight = weight_scratch.get();
  }
  if (grad_bias == nullptr) {
    bias_scratch = ctx.workspace(channel_bytes);
    grad_bias = bias_scratch.get();
  }
  const Scaling scaling(dtype);
  SUBLET_CUDNN_CHECK(cudnnBatchNormalizationBackward(
      handle, kMode, scaling.one(), scaling.zero(), scaling.one(), scaling.zero(), d.data.get(), input, d.data.get(),
      grad_output, d.data.get(), grad_input, d.parameters.get(), scale.get(), grad_weight, grad_bias,
      kBackwardEpsilonUnused, save_mean, save_invstd));
}

}  // namespace sublet::ops::cuda
