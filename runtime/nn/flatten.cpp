#include "runtime/nn/flatten.h"

namespace sublet::nn {

Tensor Flatten::forward(const Tensor& input) { return input.flatten(options_.start_dim(), options_.end_dim()); }

}  // namespace sublet::nn
