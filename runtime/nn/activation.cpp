#include "runtime/nn/activation.h"

namespace sublet::nn {

Tensor ReLU::forward(const Tensor& input) { return input.relu(); }

}  // namespace sublet::nn
