#pragma once
// softmax over each row of [rows, cols] (ClassScoresShape, ops/loss.h: batch = rows, classes =
// cols), shifted by the row maximum. log_softmax, its companion, is in ops/loss.h.
// 16-bit rows are computed in float32.
#include "core/dtype.h"
#include "ops/context.h"
#include "ops/loss.h"

namespace sublet::ops {

void softmax_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* input, void* output);
// grad_input = output * (grad_output - rowsum(grad_output * output)), from the forward's output.
void softmax_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* grad_output,
                      const void* output, void* grad_input);

}  // namespace sublet::ops
