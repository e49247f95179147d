#include "ops/optim_update.h"

#include <string>

#include "core/errors.h"
#include "ops/device_services.h"
#include "ops/optim_update_kernels.h"

namespace sublet::ops {
namespace {

template <typename Tensors>
void check_tensors(const char* op, Tensors tensors) {
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].numel < 0)
      throw ValueError(std::string(op) + ": tensor " + std::to_string(i) + " has a negative element count");
    if (tensors[i].numel > 0 && (!tensors[i].param || !tensors[i].grad))
      throw ValueError(std::string(op) + ": tensor " + std::to_string(i) + " lacks a parameter or gradient pointer");
  }
}

void check_scalars(const char* op, const Context& ctx, const UpdateScalars& scalars) {
  if (scalars.device && !ctx.device.is_cuda())
    throw DeviceError(std::string(op) + ": device-resident scalars need a CUDA context, got " + ctx.device.str());
}

}  // namespace

void sgd_update(const Context& ctx, DType dtype, std::span<const SgdTensor> tensors, const SgdHyper& hyper,
                const UpdateScalars& scalars) {
  // Looked up first: a dtype without a kernel is an error even for an empty parameter list.
  SgdUpdateKernel* const kernel = sgd_update_kernels().get("sgd_update", ctx.device, dtype);
  check_tensors("sgd_update", tensors);
  check_scalars("sgd_update", ctx, scalars);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (hyper.momentum != 0.0 && tensors[i].numel > 0 && !tensors[i].momentum_buffer)
      throw ValueError("sgd_update: tensor " + std::to_string(i) + " needs a momentum buffer (momentum " +
                       std::to_string(hyper.momentum) + ")");
  }
  if (tensors.empty()) return;
  kernel(ctx, dtype, tensors, hyper, scalars);
}

void adam_update(const Context& ctx, DType dtype, std::span<const AdamTensor> tensors, const AdamHyper& hyper,
                 const UpdateScalars& scalars) {
  // Looked up first: a dtype without a kernel is an error even for an empty parameter list.
  AdamUpdateKernel* const kernel = adam_update_kernels().get("adam_update", ctx.device, dtype);
  check_tensors("adam_update", tensors);
  check_scalars("adam_update", ctx, scalars);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].numel > 0 && (!tensors[i].exp_avg || !tensors[i].exp_avg_sq))
      throw ValueError("adam_update: tensor " + std::to_string(i) + " lacks its exp_avg/exp_avg_sq state");
    if (!scalars.device && tensors[i].step < 1)
      throw ValueError("adam_update: tensor " + std::to_string(i) + " has step " + std::to_string(tensors[i].step) +
                       "; the first update is step 1");
  }
  if (tensors.empty()) return;
  kernel(ctx, dtype, tensors, hyper, scalars);
}

void write_update_scalars(const Context& ctx, double* device_values, const double* host_values, std::int64_t count) {
  if (count <= 0) return;
  if (const auto write = device_services(ctx.device.type).write_update_scalars) {
    return write(ctx, device_values, host_values, count);
  }
  throw DeviceError("write_update_scalars: device scalars live in CUDA memory, got " + ctx.device.str());
}

}  // namespace sublet::ops
