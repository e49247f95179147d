#include "ops/pooling.h"

#include <string>

#include "core/errors.h"
#include "ops/pooling_kernels.h"

namespace sublet::ops {

namespace {

std::string dims(std::int64_t a, std::int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

std::string input_dims(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  return "[" + std::to_string(n) + ", " + std::to_string(c) + ", " + std::to_string(h) + ", " +
         std::to_string(w) + "]";
}

}  // namespace

std::int64_t Pool2dShape::out_height() const {
  return (in_height + 2 * pad_h - dilation_h * (kernel_h - 1) - 1) / stride_h + 1;
}

std::int64_t Pool2dShape::out_width() const {
  return (in_width + 2 * pad_w - dilation_w * (kernel_w - 1) - 1) / stride_w + 1;
}

void Pool2dShape::validate(const char* op) const {
  const std::string name = op;
  if (batch < 1 || channels < 1 || in_height < 1 || in_width < 1) {
    throw ShapeError(name + ": input must be non-empty (N,C,H,W), got " +
                     input_dims(batch, channels, in_height, in_width));
  }
  if (kernel_h < 1 || kernel_w < 1 || stride_h < 1 || stride_w < 1 || dilation_h < 1 ||
      dilation_w < 1) {
    throw ShapeError(name + ": kernel, stride and dilation must be >= 1, got kernel " +
                     dims(kernel_h, kernel_w) + ", stride " + dims(stride_h, stride_w) +
                     ", dilation " + dims(dilation_h, dilation_w));
  }
  if (pad_h < 0 || pad_w < 0 || 2 * pad_h > kernel_h || 2 * pad_w > kernel_w) {
    throw ShapeError(name + ": padding must be between 0 and half the kernel, got padding " +
                     dims(pad_h, pad_w) + " for kernel " + dims(kernel_h, kernel_w));
  }
  if (in_height + 2 * pad_h < dilation_h * (kernel_h - 1) + 1 ||
      in_width + 2 * pad_w < dilation_w * (kernel_w - 1) + 1) {
    throw ShapeError(name + ": kernel " + dims(kernel_h, kernel_w) + " (dilation " +
                     dims(dilation_h, dilation_w) + ") does not fit in the padded input " +
                     dims(in_height + 2 * pad_h, in_width + 2 * pad_w) + " of input " +
                     input_dims(batch, channels, in_height, in_width));
  }
}

void AdaptivePool2dShape::validate() const {
  if (batch < 1 || channels < 1 || in_height < 1 || in_width < 1) {
    throw ShapeError("adaptive_avg_pool2d: input must be non-empty (N,C,H,W), got " +
                     input_dims(batch, channels, in_height, in_width));
  }
  if (out_height < 1 || out_width < 1) {
    throw ShapeError("adaptive_avg_pool2d: output size must be >= 1, got " +
                     dims(out_height, out_width));
  }
}

namespace {
void require_no_dilation(const Pool2dShape& shape) {
  if (shape.dilation_h != 1 || shape.dilation_w != 1) {
    throw ShapeError("avg_pool2d: dilation must be 1, got " + dims(shape.dilation_h, shape.dilation_w));
  }
}
}  // namespace

void max_pool2d_forward(const Context& ctx, const Pool2dShape& shape, DType dtype,
                        const void* input, void* output, std::int64_t* indices) {
  shape.validate("max_pool2d");
  max_pool2d_forward_kernels().get("max_pool2d", ctx.device, dtype, shape.format)(ctx, shape, dtype, input, output, indices);
}

void max_pool2d_backward(const Context& ctx, const Pool2dShape& shape, DType dtype,
                         const void* grad_output, const std::int64_t* indices, void* grad_input) {
  shape.validate("max_pool2d");
  max_pool2d_backward_kernels().get("max_pool2d", ctx.device, dtype, shape.format)(ctx, shape, dtype, grad_output, indices,
                                                                     grad_input);
}

namespace {
void require_positions_fit(const Pool2dShape& shape) {
  if (shape.kernel_h * shape.kernel_w > kMaxPoolWindowPositions) {
    throw ShapeError("max_pool2d (window positions): the window must have at most " +
                     std::to_string(kMaxPoolWindowPositions) + " taps, got kernel " +
                     dims(shape.kernel_h, shape.kernel_w));
  }
}
}  // namespace

bool max_pool2d_has_positions(const Context& ctx, const Pool2dShape& shape, DType dtype) {
  return shape.kernel_h * shape.kernel_w <= kMaxPoolWindowPositions &&
         max_pool2d_forward_positions_kernels().find(ctx.device.type, dtype, shape.format) != nullptr &&
         max_pool2d_backward_positions_kernels().find(ctx.device.type, dtype, shape.format) != nullptr;
}

void max_pool2d_forward_positions(const Context& ctx, const Pool2dShape& shape, DType dtype,
                                  const void* input, void* output, std::uint8_t* positions) {
  shape.validate("max_pool2d");
  require_positions_fit(shape);
  max_pool2d_forward_positions_kernels().get("max_pool2d (window positions)", ctx.device, dtype, shape.format)(
      ctx, shape, dtype, input, output, positions);
}

void max_pool2d_backward_positions(const Context& ctx, const Pool2dShape& shape, DType dtype,
                                   const void* grad_output, const std::uint8_t* positions,
                                   void* grad_input) {
  shape.validate("max_pool2d");
  require_positions_fit(shape);
  max_pool2d_backward_positions_kernels().get("max_pool2d (window positions)", ctx.device, dtype, shape.format)(
      ctx, shape, dtype, grad_output, positions, grad_input);
}

void avg_pool2d_forward(const Context& ctx, const Pool2dShape& shape, DType dtype,
                        const void* input, void* output, bool count_include_pad) {
  shape.validate("avg_pool2d");
  require_no_dilation(shape);
  avg_pool2d_forward_kernels().get("avg_pool2d", ctx.device, dtype, shape.format)(ctx, shape, dtype, input, output,
                                                                    count_include_pad);
}

void avg_pool2d_backward(const Context& ctx, const Pool2dShape& shape, DType dtype,
                         const void* grad_output, void* grad_input, bool count_include_pad) {
  shape.validate("avg_pool2d");
  require_no_dilation(shape);
  avg_pool2d_backward_kernels().get("avg_pool2d", ctx.device, dtype, shape.format)(ctx, shape, dtype, grad_output, grad_input,
                                                                     count_include_pad);
}

void adaptive_avg_pool2d_forward(const Context& ctx, const AdaptivePool2dShape& shape,
                                 DType dtype, const void* input, void* output) {
  shape.validate();
  adaptive_avg_pool2d_forward_kernels().get("adaptive_avg_pool2d", ctx.device, dtype, shape.format)(ctx, shape, dtype, input,
                                                                                      output);
}

void adaptive_avg_pool2d_backward(const Context& ctx, const AdaptivePool2dShape& shape,
                                  DType dtype, const void* grad_output, void* grad_input) {
  shape.validate();
  adaptive_avg_pool2d_backward_kernels().get("adaptive_avg_pool2d", ctx.device, dtype, shape.format)(ctx, shape, dtype,
                                                                                       grad_output, grad_input);
}

}  // namespace sublet::ops
