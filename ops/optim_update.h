#pragma once
// Fused optimizer updates: one call updates every parameter of an optimizer (multi-tensor, as
// PyTorch's fused/foreach paths), instead of 4-8 elementwise ops per parameter. The formulas are
// those of runtime/optim's Tensor-op path (PyTorch semantics), with the same operation order and
// the scalars cast to the element type where that path casts them, so a float64 update agrees with
// it to rounding (contraction to FMA may differ) and a float32 one to float32 rounding.
//
// SGD, per element (g = grad):
//   g = g + wd * p                                     (weight_decay != 0)
//   buf = first ? g : buf * momentum + (1 - dampening) * g;  g = nesterov ? g + momentum * buf : buf
//   p = p + (-lr) * g
// Adam / AdamW, per element, with t the parameter's step (1 on its first update):
//   AdamW: p = p * (1 - lr * wd)   Adam: g = g + wd * p   (weight_decay != 0)
//   m = m * b1 + (1 - b1) * g;  v = v * b2 + (1 - b2) * g * g
//   p = p + (-lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//
// Scalars that change from step to step (lr, Adam's t) come from UpdateScalars: host values, or
// an array in the device's memory read by the kernel when it runs. The device form is what lets a
// captured CUDA graph follow a learning-rate schedule and advance t: the graph bakes the address,
// and the caller writes new values there (write_update_scalars) before each replay, or the launch
// advances the counts itself (advance_counts). Everything else (pointers, sizes, momentum, betas,
// the `first` flags) is fixed at launch and so at capture.
//
// Loss scaling (amp::GradScaler), as PyTorch's fused optimizers' found_inf/grad_scale: the launch
// reads a found-inf flag in device memory when it runs and, when it is set, changes nothing at all
// (parameters, momentum buffers, moments, gradients, counts): the skip costs no host read, so a
// CUDA graph can capture a scaled step. It can also unscale the gradients on the way (inv_scale),
// which saves the separate pass over them.
#include <cstdint>
#include <span>

#include "ops/context.h"
#include "core/dtype.h"

namespace sublet::ops {

// One parameter: contiguous arrays of `numel` elements of the call's dtype.
struct SgdTensor {
  void* param = nullptr;
  void* grad = nullptr;             // written only with UpdateScalars::inv_scale (unscaled in place)
  void* momentum_buffer = nullptr;  // unused (may be null) when momentum == 0
  std::int64_t numel = 0;
  bool first = false;               // the buffer is new: it becomes g instead of being decayed
  // With UpdateScalars::advance_counts: where the parameter's update count is in
  // UpdateScalars::device (1 + step_slot; -1: the list position). A count of 1 after the advance
  // also makes the update the buffer's first (a buffer created by a skipped step holds nothing).
  std::int64_t step_slot = -1;
};

struct SgdHyper {
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

struct AdamTensor {
  void* param = nullptr;
  void* grad = nullptr;             // written only with UpdateScalars::inv_scale (unscaled in place)
  void* exp_avg = nullptr;
  void* exp_avg_sq = nullptr;
  std::int64_t numel = 0;
  std::int64_t step = 0;            // host form of t; the device form is in UpdateScalars::device
  std::int64_t step_slot = -1;      // where t is in UpdateScalars::device (1 + step_slot); -1: the list position
};

struct AdamHyper {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // AdamW
};

struct UpdateScalars {
  double lr = 0.0;
  // Optional: float64 array [lr, t_0, t_1, ...] in the memory of the context's device (host memory
  // for the CPU), read when the launch runs (t as float64 counts, at 1 + the tensor's step_slot).
  // When null, `lr` and AdamTensor::step are used.
  double* device = nullptr;
  // With `device`: the counts there are those before this update. The launch adds 1 to the count
  // of each of its tensors (and to device[1 + counter_slot] when counter_slot >= 0, an optimizer's
  // step count) unless found_inf skips it, and updates with the new counts, so a skipped step
  // leaves them unchanged with no host branch. Slots must be distinct.
  bool advance_counts = false;
  std::int64_t counter_slot = -1;
  // Optional, float32 scalars in the context device's memory, read when the launch runs:
  // found_inf non-zero (NaN included): the launch changes nothing; inv_scale: the gradients are
  // still scaled: each is multiplied by *inv_scale (cast to the element type), written back (so
  // the gradient ends unscaled, as GradScaler::unscale_ leaves it) and used.
  const float* found_inf = nullptr;
  const float* inv_scale = nullptr;
};

void sgd_update(const Context& ctx, DType dtype, std::span<const SgdTensor> tensors, const SgdHyper& hyper,
                const UpdateScalars& scalars);
void adam_update(const Context& ctx, DType dtype, std::span<const AdamTensor> tensors, const AdamHyper& hyper,
                 const UpdateScalars& scalars);

// One array for mark_non_finite: `numel` elements of the call's dtype from `data`.
struct FiniteCheckTensor {
  const void* data = nullptr;
  std::int64_t numel = 0;
};

// GradScaler's inf/NaN check of a step's gradients in one launch over all of them (PyTorch's
// _amp_foreach_non_finite_check_and_unscale_, without the unscale, which the fused updates do):
// writes NaN to *found_inf (one float32 in the context device's memory) when any element is
// inf or NaN, and leaves it as it is otherwise. No host read, so a CUDA graph can capture it.
void mark_non_finite(const Context& ctx, DType dtype, std::span<const FiniteCheckTensor> tensors, float* found_inf);

// Stream-ordered copy of `count` host doubles to device memory for UpdateScalars::device (on the
// CPU a plain copy); the host array may be reused as soon as this returns (no synchronisation).
// Throws Error while the stream is capturing a graph: a captured copy would replay stale values.
void write_update_scalars(const Context& ctx, double* device_values, const double* host_values,
                          std::int64_t count);

}  // namespace sublet::ops
