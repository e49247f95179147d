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
// (CUDA) a device array read by the kernel when it runs. The device form is what lets a captured
// CUDA graph follow a learning-rate schedule and advance t: the graph bakes the address, and the
// caller writes new values there (write_update_scalars) before each replay. Everything else
// (pointers, sizes, momentum, betas, the `first` flags) is fixed at launch and so at capture.
#include <cstdint>
#include <span>

#include "ops/context.h"
#include "core/dtype.h"

namespace sublet::ops {

// One parameter: contiguous arrays of `numel` elements of the call's dtype.
struct SgdTensor {
  void* param = nullptr;
  const void* grad = nullptr;
  void* momentum_buffer = nullptr;  // unused (may be null) when momentum == 0
  std::int64_t numel = 0;
  bool first = false;               // the buffer is new: it becomes g instead of being decayed
};

struct SgdHyper {
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

struct AdamTensor {
  void* param = nullptr;
  const void* grad = nullptr;
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
  // CUDA only, optional: float64 device array [lr, t_0, t_1, ...] (t as float64 counts, at
  // 1 + AdamTensor::step_slot; SGD reads only lr). When null, `lr` and AdamTensor::step are used.
  const double* device = nullptr;
};

void sgd_update(const Context& ctx, DType dtype, std::span<const SgdTensor> tensors, const SgdHyper& hyper,
                const UpdateScalars& scalars);
void adam_update(const Context& ctx, DType dtype, std::span<const AdamTensor> tensors, const AdamHyper& hyper,
                 const UpdateScalars& scalars);

// Stream-ordered copy of `count` host doubles to device memory for UpdateScalars::device; the
// host array may be reused as soon as this returns (no synchronisation). Throws Error while the
// stream is capturing a graph: a captured copy would replay stale values.
void write_update_scalars(const Context& ctx, double* device_values, const double* host_values,
                          std::int64_t count);

}  // namespace sublet::ops
