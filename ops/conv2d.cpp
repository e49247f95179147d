#include "ops/conv2d.h"

#include <sstream>

#include "core/errors.h"
#include "ops/conv2d_kernels.h"

namespace sublet::ops {

namespace {

std::int64_t dilated_extent(std::int64_t kernel, std::int64_t dilation) {
  return dilation * (kernel - 1) + 1;
}

}  // namespace

std::int64_t Conv2dShape::out_height() const {
  return (in_height + 2 * pad_h - dilated_extent(kernel_h, dilation_h)) / stride_h + 1;
}

std::int64_t Conv2dShape::out_width() const {
  return (in_width + 2 * pad_w - dilated_extent(kernel_w, dilation_w)) / stride_w + 1;
}

void Conv2dShape::validate() const {
  auto fail = [](const std::string& what) { throw ShapeError("conv2d: " + what); };
  std::ostringstream found;
  if (batch < 1 || in_channels < 1 || in_height < 1 || in_width < 1) {
    found << "input must be non-empty (N,C,H,W), got [" << batch << ", " << in_channels << ", "
          << in_height << ", " << in_width << "]";
    fail(found.str());
  }
  if (out_channels < 1 || kernel_h < 1 || kernel_w < 1) {
    found << "weight must be non-empty (OC,C/groups,KH,KW), got out_channels " << out_channels
          << ", kernel " << kernel_h << "x" << kernel_w;
    fail(found.str());
  }
  if (stride_h < 1 || stride_w < 1 || dilation_h < 1 || dilation_w < 1 || pad_h < 0 || pad_w < 0) {
    found << "stride and dilation must be >= 1 and padding >= 0, got stride " << stride_h << "x"
          << stride_w << ", dilation " << dilation_h << "x" << dilation_w << ", padding " << pad_h
          << "x" << pad_w;
    fail(found.str());
  }
  if (groups < 1 || in_channels % groups != 0 || out_channels % groups != 0) {
    found << "in_channels and out_channels must be divisible by groups, got in_channels "
          << in_channels << ", out_channels " << out_channels << ", groups " << groups;
    fail(found.str());
  }
  const std::int64_t extent_h = dilated_extent(kernel_h, dilation_h);
  const std::int64_t extent_w = dilated_extent(kernel_w, dilation_w);
  if (extent_h > in_height + 2 * pad_h || extent_w > in_width + 2 * pad_w) {
    found << "kernel " << kernel_h << "x" << kernel_w << " (dilated extent " << extent_h << "x"
          << extent_w << ") must fit in the padded input " << in_height + 2 * pad_h << "x"
          << in_width + 2 * pad_w << " (input " << in_height << "x" << in_width << ", padding "
          << pad_h << "x" << pad_w << ")";
    fail(found.str());
  }
}

void conv2d_forward(const Context& ctx, const Conv2dShape& shape, DType dtype, const void* input,
                    const void* weight, const void* bias, void* output) {
  shape.validate();
  conv2d_forward_kernels().get("conv2d", ctx.device, dtype, shape.format)(ctx, shape, dtype, input, weight, bias, output);
}

void conv2d_backward_input(const Context& ctx, const Conv2dShape& shape, DType dtype,
                           const void* grad_output, const void* weight, void* grad_input) {
  shape.validate();
  conv2d_backward_input_kernels().get("conv2d", ctx.device, dtype, shape.format)(ctx, shape, dtype, grad_output, weight,
                                                                   grad_input);
}

bool conv2d_backward_input_accumulate(const Context& ctx, const Conv2dShape& shape, DType dtype,
                                      const void* grad_output, const void* weight, void* grad_input) {
  shape.validate();
  auto* kernel = conv2d_backward_input_accumulate_kernels().find(ctx.device.type, dtype, shape.format);
  return kernel != nullptr && kernel(ctx, shape, dtype, grad_output, weight, grad_input);
}

void conv2d_backward_weight(const Context& ctx, const Conv2dShape& shape, DType dtype,
                            const void* grad_output, const void* input, void* grad_weight,
                            void* grad_bias) {
  shape.validate();
  conv2d_backward_weight_kernels().get("conv2d", ctx.device, dtype, shape.format)(ctx, shape, dtype, grad_output, input,
                                                                    grad_weight, grad_bias);
}

}  // namespace sublet::ops
