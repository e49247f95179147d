#pragma once
// Internal to runtime/nn: the argument checks the functional wrappers share. Each throws with
// the op's name and what was expected and found.
#include <initializer_list>
#include <string>

#include "core/errors.h"
#include "ops/kernel_table.h"
#include "runtime/kernel_args.h"
#include "runtime/tensor.h"

namespace sublet::nn::detail {

// `t` has `rank` dims; `layout` says what they mean, e.g. "(N,C,H,W)".
inline void check_rank(const char* op, const char* what, const Tensor& t, std::int64_t rank, const char* layout) {
  if (t.dim() != rank) {
    throw ShapeError(std::string(op) + ": " + what + " must be " + std::to_string(rank) + "-D " + layout +
                     ", got " + shape_str(t.sizes()));
  }
}

// A defined floating-point tensor on input's device with input's dtype.
inline void check_like_input(const char* op, const Tensor& input, const Tensor& t) {
  sublet::detail::check_defined(op, t);
  sublet::detail::check_same_device(op, input, t);
  sublet::detail::check_same_dtype(op, input, t);
}

// An optional per-channel tensor: undefined, or 1-D [channels] like the input.
inline void check_per_channel(const char* op, const char* what, const Tensor& input, const Tensor& t,
                              std::int64_t channels) {
  if (!t.defined()) return;
  check_like_input(op, input, t);
  if (t.dim() != 1 || t.size(0) != channels) {
    throw ShapeError(std::string(op) + ": " + what + " must be [" + std::to_string(channels) + "] (one per channel), got " +
                     shape_str(t.sizes()));
  }
}

// Integer class labels [N] on the device of the scores.
inline void check_targets(const char* op, const Tensor& scores, const Tensor& targets) {
  sublet::detail::check_defined(op, targets);
  sublet::detail::check_same_device(op, scores, targets);
  if (targets.dtype() != DType::Int64) {
    throw DTypeError(std::string(op) + ": targets must be int64 class indices, got " + dtype_name(targets.dtype()));
  }
  if (targets.dim() != 1 || targets.size(0) != scores.size(0)) {
    throw ShapeError(std::string(op) + ": targets must be [" + std::to_string(scores.size(0)) + "] for scores " +
                     shape_str(scores.sizes()) + ", got " + shape_str(targets.sizes()));
  }
}

inline void* data_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// The memory format a 4-D op (convolution, batch norm, pooling) runs in: ChannelsLast when the
// input (or `weight`, for convolution, as PyTorch's cuDNN path) suggests it and every one of the
// op's kernel tables has a channels-last kernel for the input's device and dtype; Contiguous
// otherwise, where a channels-last input is converted to NCHW (the CPU has no NHWC kernels: a
// channels-last model pays one conversion at its first layer).
inline MemoryFormat choose_format(const Tensor& input, std::initializer_list<const ops::KernelTableBase*> tables,
                                  const Tensor& weight = {}) {
  const bool wants = input.dim() == 4 && (input.suggest_memory_format() == MemoryFormat::ChannelsLast ||
                                          (weight.defined() && weight.suggest_memory_format() == MemoryFormat::ChannelsLast));
  if (!wants) return MemoryFormat::Contiguous;
  for (const ops::KernelTableBase* table : tables) {
    if (!table->has(input.device().type, input.dtype(), MemoryFormat::ChannelsLast)) return MemoryFormat::Contiguous;
  }
  return MemoryFormat::ChannelsLast;
}
inline Tensor contiguous_or_undefined(const Tensor& t) { return t.defined() ? t.contiguous() : Tensor(); }

}  // namespace sublet::nn::detail
