#pragma once
// Weight initialisation, as torch.nn.init. fan_in = size(1) * receptive field (the product of
// sizes from dim 2 on), fan_out = size(0) * receptive field. gain defaults to sqrt(2) (ReLU).
// Run without recording: they are meant for parameters before training.
#include <cmath>

#include "runtime/generator.h"
#include "runtime/tensor.h"

namespace sublet::init {

enum class FanMode { FanIn, FanOut };

std::int64_t fan_in(const Tensor& weight);
std::int64_t fan_out(const Tensor& weight);

// U(-b, b) with b = gain * sqrt(3 / fan).
Tensor& kaiming_uniform_(Tensor& weight, Generator& generator = default_generator(), double gain = std::sqrt(2.0),
                         FanMode mode = FanMode::FanIn);
// N(0, std^2) with std = gain / sqrt(fan).
Tensor& kaiming_normal_(Tensor& weight, Generator& generator = default_generator(), double gain = std::sqrt(2.0),
                        FanMode mode = FanMode::FanIn);

}  // namespace sublet::init
