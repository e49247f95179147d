#pragma once
// y = x W^T + b, with PyTorch's initialisation: W and b uniform in +-1/sqrt(in_features).
// Input [..., in_features] of 2 or 3 dimensions.
#include "runtime/generator.h"
#include "runtime/nn/module.h"

namespace sublet::nn {

class LinearOptions {
 public:
  LinearOptions(std::int64_t in_features, std::int64_t out_features) : in_(in_features), out_(out_features) {}
  LinearOptions& bias(bool value) { bias_ = value; return *this; }
  LinearOptions& dtype(DType value) { dtype_ = value; return *this; }
  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }
  bool bias() const { return bias_; }
  DType dtype() const { return dtype_; }

 private:
  std::int64_t in_, out_;
  bool bias_ = true;
  DType dtype_ = DType::Float32;
};

class Linear : public Module {
 public:
  explicit Linear(const LinearOptions& options, Generator& generator = default_generator());
  Linear(std::int64_t in_features, std::int64_t out_features) : Linear(LinearOptions(in_features, out_features)) {}
  Tensor forward(const Tensor& input) override;

  Tensor weight;  // [out_features, in_features]
  Tensor bias;    // [out_features], undefined without bias
};

// Runs its children in order.
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    register_module(std::to_string(layers_.size()), module);
    layers_.push_back(module);
    return module;
  }
  Tensor forward(const Tensor& input) override;
  std::size_t size() const { return layers_.size(); }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

}  // namespace sublet::nn
