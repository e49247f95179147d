#pragma once
// Internal to runtime/: one element-wise kernel call on tensors already allocated, the problem
// coalesced first (detail::coalesce_elementwise: a dense layout such as channels-last becomes
// one flat run). For ops that write in place or into their own buffers (batch norm's ReLU).
#include "ops/elementwise.h"
#include "runtime/tensor.h"

namespace sublet::detail {

// out = op(in) over out's sizes; `in` is read with its strides (broadcast ones included).
void run_unary(ops::UnaryOp kind, const Tensor& out, ops::ConstStridedRef in, ops::UnaryParams params = {});
// out = op(a, b) over out's sizes.
void run_binary(ops::BinaryOp kind, const Tensor& out, ops::ConstStridedRef a, ops::ConstStridedRef b,
                double alpha = 1.0);

}  // namespace sublet::detail
