#include "runtime/nn/activation.h"

namespace sublet::nn {

Tensor ReLU::forward(const Tensor& input) { return input.relu(); }

Tensor GELU::forward(const Tensor& input) { return functional::gelu(input, options_.approximate()); }

}  // namespace sublet::nn
