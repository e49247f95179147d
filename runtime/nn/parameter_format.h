#pragma once
// Where `--channels-last` puts a model's parameters. On a device whose convolution kernels run
// NHWC natively (CUDA: cuDNN's NHWC engines), the 4-d parameters go channels-last with the batch,
// so no layer transposes. Elsewhere (the CPU, whose kernels are NCHW) they stay NCHW: a
// channels-last parameter would be converted on every forward and its gradient on every
// backward, while a channels-last batch is converted once, at the model's entry.
#include "core/device.h"
#include "core/dtype.h"

namespace sublet::nn {

MemoryFormat parameter_format_for(Device device, MemoryFormat requested);

}  // namespace sublet::nn
