#include "ops/optim_update.h"

#include <algorithm>
#include <string>
#include <vector>

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

// Advancing a slot twice in one launch would count one update twice.
template <typename Tensors>
void check_scalars(const char* op, Tensors tensors, const UpdateScalars& scalars) {
  if (!scalars.advance_counts) return;
  if (!scalars.device)
    throw ValueError(std::string(op) + ": advance_counts needs the device scalars (UpdateScalars::device), got none");
  std::vector<std::int64_t> slots;
  slots.reserve(tensors.size() + 1);
  for (std::size_t i = 0; i < tensors.size(); ++i)
    slots.push_back(tensors[i].step_slot >= 0 ? tensors[i].step_slot : static_cast<std::int64_t>(i));
  if (scalars.counter_slot >= 0) slots.push_back(scalars.counter_slot);
  std::sort(slots.begin(), slots.end());
  const auto twice = std::adjacent_find(slots.begin(), slots.end());
  if (twice != slots.end())
    throw ValueError(std::string(op) + ": advance_counts needs distinct count slots, slot " + std::to_string(*twice) +
                     " is named twice");
}

}  // namespace

void sgd_update(const Context& ctx, DType dtype, std::span<const SgdTensor> tensors, const SgdHyper& hyper,
                const UpdateScalars& scalars) {
  // Looked up first: a dtype without a kernel is an error even for an empty parameter list.
  SgdUpdateKernel* const kernel = sgd_update_kernels().get("sgd_update", ctx.device, dtype);
  check_tensors("sgd_update", tensors);
  check_scalars("sgd_update", tensors, scalars);
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
  check_scalars("adam_update", tensors, scalars);
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

void mark_non_finite(const Context& ctx, DType dtype, std::span<const FiniteCheckTensor> tensors, float* found_inf) {
  MarkNonFiniteKernel* const kernel = mark_non_finite_kernels().get("mark_non_finite", ctx.device, dtype);
  if (!found_inf) throw ValueError("mark_non_finite: expected a found_inf flag, got none");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].numel < 0)
      throw ValueError("mark_non_finite: tensor " + std::to_string(i) + " has a negative element count");
    if (tensors[i].numel > 0 && !tensors[i].data)
      throw ValueError("mark_non_finite: tensor " + std::to_string(i) + " has elements but no data pointer");
  }
  if (tensors.empty()) return;
  kernel(ctx, dtype, tensors, found_inf);
}

void write_update_scalars(const Context& ctx, double* device_values, const double* host_values, std::int64_t count) {
  if (count <= 0) return;
  if (ctx.device.is_cpu()) {  // the CPU kernels read the same array from host memory
    std::copy_n(host_values, count, device_values);
    return;
  }
  if (const auto write = device_services(ctx.device.type).write_update_scalars) {
    return write(ctx, device_values, host_values, count);
  }
  throw DeviceError("write_update_scalars: no scalar writer registered for " + ctx.device.str());
}

}  // namespace sublet::ops
