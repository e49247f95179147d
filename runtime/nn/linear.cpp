#include "runtime/nn/linear.h"

#include <cmath>

#include "core/errors.h"
#include "runtime/factories.h"

namespace sublet::nn {

Linear::Linear(const LinearOptions& options, Generator& generator) : Module("Linear") {
  if (options.in_features() <= 0 || options.out_features() <= 0) {
    throw ValueError("Linear: features must be positive, got in " + std::to_string(options.in_features()) +
                     ", out " + std::to_string(options.out_features()));
  }
  const double bound = 1.0 / std::sqrt(static_cast<double>(options.in_features()));
  weight = register_parameter(
      "weight", uniform({options.out_features(), options.in_features()}, -bound, bound, generator, options.dtype()));
  if (options.bias()) {
    bias = register_parameter("bias", uniform({options.out_features()}, -bound, bound, generator, options.dtype()));
  }
}

Tensor Linear::forward(const Tensor& input) {
  if (input.dim() < 1 || input.size(-1) != weight.size(1)) {
    throw ShapeError("Linear: input of shape " + shape_str(input.sizes()) + " does not end in in_features = " +
                     std::to_string(weight.size(1)));
  }
  Tensor out = input.matmul(weight.t());
  return bias.defined() ? out + bias : out;
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (auto& layer : layers_) x = (*layer)(x);
  return x;
}

}  // namespace sublet::nn
