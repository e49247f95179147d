#pragma once
// The convolution + batch norm fusion at the module level: a ResNet block's chain
// conv -> bn -> relu -> conv runs as nn::functional::conv2d_with_sums and batch_norm_relu_conv2d
// (the batch norm's statistics from the convolution's epilogue, the batch norm and ReLU applied
// in the next convolution's prologue) when the switch (TuningOptions::conv_bn_fusion,
// core/tuning.h) and the modules allow it:
//
//   if (nn::conv_bn_fusion_applies(input, {conv1.get(), conv2.get()}, {bn1.get()})) {
//     auto y = nn::conv_with_sums(*conv1, input);
//     Tensor out = nn::bn_relu_conv(*bn1, y, *conv2, false).output;   // conv2(relu(bn1(conv1(x))))
//   }
//
// The modules' forward hooks are not called on this path (the modules' parameters and buffers
// are used directly).
#include <initializer_list>

#include "runtime/nn/batch_norm.h"
#include "runtime/nn/conv2d.h"
#include "runtime/nn/functional.h"

namespace sublet::nn {

// Whether the chain may run fused: the switch is auto (and the input on a CUDA device) or on;
// training; every batch norm affine, tracking running statistics, with a numeric momentum and
// float32 parameters; every convolution without bias; the input float32, bfloat16 or float16.
bool conv_bn_fusion_applies(const Tensor& input, std::initializer_list<const Conv2d*> convs,
                            std::initializer_list<const BatchNorm2d*> norms);

// conv(input) with the sums of its output's channels.
functional::Conv2dSums conv_with_sums(const Conv2d& conv, const Tensor& input);

// conv(relu(bn(input.output))) in training mode, the statistics from input's sums; want_sums:
// also the output's sums, for the batch norm after conv.
functional::Conv2dSums bn_relu_conv(BatchNorm2d& bn, const functional::Conv2dSums& input, const Conv2d& conv,
                                    bool want_sums);

}  // namespace sublet::nn
