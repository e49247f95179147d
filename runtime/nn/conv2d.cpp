#include "runtime/nn/conv2d.h"

#include <cmath>
#include <string>

#include "core/errors.h"
#include "runtime/factories.h"
#include "runtime/init.h"

namespace sublet::nn {

namespace {

void check_options(const Conv2dOptions& o) {
  auto positive = [](const Pair2d& p) { return p.h > 0 && p.w > 0; };
  if (o.in_channels() <= 0 || o.out_channels() <= 0 || o.groups() <= 0) {
    throw ValueError("Conv2d: in_channels, out_channels and groups must be positive, got " +
                     std::to_string(o.in_channels()) + ", " + std::to_string(o.out_channels()) + ", " +
                     std::to_string(o.groups()));
  }
  if (o.in_channels() % o.groups() != 0 || o.out_channels() % o.groups() != 0) {
    throw ValueError("Conv2d: in_channels (" + std::to_string(o.in_channels()) + ") and out_channels (" +
                     std::to_string(o.out_channels()) + ") must be divisible by groups (" +
                     std::to_string(o.groups()) + ")");
  }
  if (!positive(o.kernel_size()) || !positive(o.stride()) || !positive(o.dilation()) || o.padding().h < 0 ||
      o.padding().w < 0) {
    throw ValueError("Conv2d: kernel_size, stride and dilation must be positive and padding non-negative");
  }
}

}  // namespace

Conv2d::Conv2d(const Conv2dOptions& options, Generator& generator) : Module("Conv2d"), options_(options) {
  check_options(options);
  const Shape weight_shape{options.out_channels(), options.in_channels() / options.groups(), options.kernel_size().h,
                           options.kernel_size().w};
  Tensor w = empty(weight_shape, options.dtype());
  // kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / (1 + a^2)) = sqrt(1/3), bound 1/sqrt(fan_in).
  init::kaiming_uniform_(w, generator, std::sqrt(1.0 / 3.0));
  weight = register_parameter("weight", w);
  if (options.bias()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(init::fan_in(weight)));
    bias = register_parameter("bias", uniform({options.out_channels()}, -bound, bound, generator, options.dtype()));
  }
}

Tensor Conv2d::forward(const Tensor& input) {
  return functional::conv2d(input, weight, bias,
                            functional::Conv2dFuncOptions()
                                .stride(options_.stride())
                                .padding(options_.padding())
                                .dilation(options_.dilation())
                                .groups(options_.groups()));
}

}  // namespace sublet::nn
