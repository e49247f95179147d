#pragma once
// nn::ReLU, as LibTorch's (without the inplace option: in-place ops are not recorded by
// autograd here, so an in-place ReLU would break backward).
#include "runtime/nn/module.h"

namespace sublet::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& input) override;
};

}  // namespace sublet::nn
