#pragma once
// 2-D convolution (cross-correlation, as PyTorch) on NCHW-contiguous buffers.
// Layouts: input [N, C, H, W], weight [OC, C/groups, KH, KW], bias [OC],
// output [N, OC, OH, OW]. All pointers are device memory of `ctx.device`, caller-allocated;
// scratch comes from ctx.workspace() so that it shows in the allocator statistics.
#include <cstdint>

#include "ops/context.h"
#include "core/dtype.h"

namespace sublet::ops {

struct Conv2dShape {
  std::int64_t batch = 0, in_channels = 0, in_height = 0, in_width = 0;
  std::int64_t out_channels = 0, kernel_h = 0, kernel_w = 0;
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1, groups = 1;
  // Contiguous: every buffer is NCHW-dense. ChannelsLast: activations are NHWC-dense (C fastest)
  // and, for convolution, the weight is [OC, KH, KW, C/groups]-dense; per-channel vectors are
  // unchanged. Picks the kernel table's entry (ops/kernel_table.h), as dtype does.
  MemoryFormat format = MemoryFormat::Contiguous;

  std::int64_t out_height() const;
  std::int64_t out_width() const;
  std::int64_t input_numel() const { return batch * in_channels * in_height * in_width; }
  std::int64_t weight_numel() const { return out_channels * (in_channels / groups) * kernel_h * kernel_w; }
  std::int64_t output_numel() const { return batch * out_channels * out_height() * out_width(); }
  // Throws ShapeError naming conv2d, what was expected and what was found.
  void validate() const;
};

// output = conv(input, weight) + bias. bias may be nullptr.
void conv2d_forward(const Context& ctx, const Conv2dShape& shape, DType dtype, const void* input,
                    const void* weight, const void* bias, void* output);
// grad_input (overwritten) = d(sum(output * grad_output)) / d(input).
void conv2d_backward_input(const Context& ctx, const Conv2dShape& shape, DType dtype,
                           const void* grad_output, const void* weight, void* grad_input);
// grad_input += d(sum(output * grad_output)) / d(input), where the backend folds the sum into
// the pass (cuDNN's and cuBLAS's beta = 1: no separate add, no second buffer); returns false,
// having enqueued nothing, where it does not (the CPU; cuDNN shapes only its legacy API runs):
// the caller then computes the gradient apart and adds it.
bool conv2d_backward_input_accumulate(const Context& ctx, const Conv2dShape& shape, DType dtype,
                                      const void* grad_output, const void* weight, void* grad_input);
// grad_weight and grad_bias (overwritten, not accumulated); grad_bias may be nullptr.
void conv2d_backward_weight(const Context& ctx, const Conv2dShape& shape, DType dtype,
                            const void* grad_output, const void* input, void* grad_weight,
                            void* grad_bias);

}  // namespace sublet::ops
