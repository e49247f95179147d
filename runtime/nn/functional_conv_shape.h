#pragma once
// The convolution shape of a conv2d call (runtime/nn/functional_conv.cpp), shared with the
// convolution + batch norm fusion (runtime/nn/functional_conv_bn.cpp). Throws ShapeError naming
// conv2d when the weight's channels and groups do not match the input.
#include "ops/conv2d.h"
#include "runtime/nn/functional.h"

namespace sublet::nn::functional {

ops::Conv2dShape conv2d_shape(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& options);

}  // namespace sublet::nn::functional
