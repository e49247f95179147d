#pragma once
// nn::Dropout, as LibTorch's: nn::Dropout(nn::DropoutOptions(0.5)). While training, zeroes each
// element with probability p and scales the rest by 1/(1-p); in eval it is the identity. Masks
// are drawn from the generator given at construction (the default one unless told), which must
// outlive the module; a model seeded the same way drops the same elements.
#include "runtime/generator.h"
#include "runtime/nn/module.h"

namespace sublet::nn {

class DropoutOptions {
 public:
  DropoutOptions(double p = 0.5) : p_(p) {}  // NOLINT(google-explicit-constructor)
  DropoutOptions& p(double value) { p_ = value; return *this; }
  double p() const { return p_; }

 private:
  double p_;
};

class Dropout : public Module {
 public:
  explicit Dropout(const DropoutOptions& options = {}, Generator& generator = default_generator());
  Tensor forward(const Tensor& input) override;
  const DropoutOptions& options() const { return options_; }
  std::vector<Generator*> own_generators() const override { return {generator_}; }

 private:
  DropoutOptions options_;
  Generator* generator_;
};

}  // namespace sublet::nn
