#pragma once
// 2-D max, average and adaptive average pooling on NCHW-contiguous buffers (or NHWC-dense ones
// where shape.format is ChannelsLast), PyTorch semantics (floor output sizes: ceil_mode is not
// supported). Input [N, C, H, W] -> output [N, C, OH, OW], input and output of one dtype (16-bit
// ones accumulate in float32). All pointers are device memory of ctx.device, caller-allocated.
#include <cstdint>

#include "ops/context.h"
#include "core/dtype.h"

namespace sublet::ops {

struct Pool2dShape {
  std::int64_t batch = 0, channels = 0, in_height = 0, in_width = 0;
  std::int64_t kernel_h = 0, kernel_w = 0;
  // PyTorch's default stride is the kernel size; here it is spelled out by the caller.
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1;  // max pooling only; avg pooling needs 1
  // Contiguous: every buffer is NCHW-dense. ChannelsLast: activations are NHWC-dense (C fastest)
  //. Picks the kernel table's entry (ops/kernel_table.h), as dtype does.
  MemoryFormat format = MemoryFormat::Contiguous;

  std::int64_t out_height() const;
  std::int64_t out_width() const;
  std::int64_t input_numel() const { return batch * channels * in_height * in_width; }
  std::int64_t output_numel() const { return batch * channels * out_height() * out_width(); }
  // Throws ShapeError naming `op`: sizes >= 1, padding at most half the kernel (as PyTorch,
  // so that every window sees at least one input element), a non-empty output.
  void validate(const char* op) const;
};

// output = max over each window; indices[i] = h * W + w of the maximum inside its input
// plane (PyTorch's layout, for either memory format; indices are laid out as the output), int64.
// A NaN in a window is its maximum, as in PyTorch.
void max_pool2d_forward(const Context& ctx, const Pool2dShape& shape, DType dtype,
                        const void* input, void* output, std::int64_t* indices);
// grad_input (overwritten) receives each grad_output element at its index.
void max_pool2d_backward(const Context& ctx, const Pool2dShape& shape, DType dtype,
                         const void* grad_output, const std::int64_t* indices, void* grad_input);

// The same max pooling saving, in place of each int64 index, the maximum's position inside its
// window, kh * kernel_w + kw in window order: one byte per output, an eighth of the indices'
// memory, for callers that keep them only for the backward. Same outputs and gradients, bit for
// bit, as the pair above. Windows of at most kMaxPoolWindowPositions taps; a backend may not
// have these kernels: max_pool2d_has_positions says whether the call runs (the CPU has none).
inline constexpr std::int64_t kMaxPoolWindowPositions = 256;
bool max_pool2d_has_positions(const Context& ctx, const Pool2dShape& shape, DType dtype);
void max_pool2d_forward_positions(const Context& ctx, const Pool2dShape& shape, DType dtype,
                                  const void* input, void* output, std::uint8_t* positions);
void max_pool2d_backward_positions(const Context& ctx, const Pool2dShape& shape, DType dtype,
                                   const void* grad_output, const std::uint8_t* positions,
                                   void* grad_input);

// Mean over each window. count_include_pad = true divides by the window clipped to the padded
// input (PyTorch's default); false by the number of real input elements in it.
void avg_pool2d_forward(const Context& ctx, const Pool2dShape& shape, DType dtype,
                        const void* input, void* output, bool count_include_pad = true);
void avg_pool2d_backward(const Context& ctx, const Pool2dShape& shape, DType dtype,
                         const void* grad_output, void* grad_input, bool count_include_pad = true);

struct AdaptivePool2dShape {
  std::int64_t batch = 0, channels = 0, in_height = 0, in_width = 0;
  std::int64_t out_height = 0, out_width = 0;
  MemoryFormat format = MemoryFormat::Contiguous;  // as Pool2dShape::format

  std::int64_t input_numel() const { return batch * channels * in_height * in_width; }
  std::int64_t output_numel() const { return batch * channels * out_height * out_width; }
  void validate() const;  // throws ShapeError naming adaptive_avg_pool2d
};

// Output cell (i, j) averages rows [floor(i*H/OH), ceil((i+1)*H/OH)) and the columns likewise.
void adaptive_avg_pool2d_forward(const Context& ctx, const AdaptivePool2dShape& shape,
                                 DType dtype, const void* input, void* output);
void adaptive_avg_pool2d_backward(const Context& ctx, const AdaptivePool2dShape& shape,
                                  DType dtype, const void* grad_output, void* grad_input);

}  // namespace sublet::ops
