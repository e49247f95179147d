#pragma once
// Activation modules, as LibTorch's. nn::ReLU comes without the inplace option: in-place ops are
// not recorded by autograd here, so an in-place ReLU would break backward.
#include "runtime/nn/functional.h"
#include "runtime/nn/module.h"

namespace sublet::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& input) override;
};

class GELUOptions {
 public:
  // GeluApproximate::Tanh is GPT-2's (PyTorch's approximate="tanh").
  GELUOptions& approximate(functional::GeluApproximate value) { approximate_ = value; return *this; }
  functional::GeluApproximate approximate() const { return approximate_; }

 private:
  functional::GeluApproximate approximate_ = functional::GeluApproximate::None;
};

class GELU : public Module {
 public:
  explicit GELU(const GELUOptions& options = {}) : Module("GELU"), options_(options) {}
  Tensor forward(const Tensor& input) override;
  const GELUOptions& options() const { return options_; }

 private:
  GELUOptions options_;
};

}  // namespace sublet::nn
