#pragma once
// Pooling layers, as LibTorch's: nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)),
// nn::AvgPool2d(nn::AvgPool2dOptions(2)), nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({1, 1})).
// The module options are the functional ones (LibTorch aliases them the same way); an unset
// stride means the kernel size.
#include "runtime/nn/functional.h"
#include "runtime/nn/module.h"

namespace sublet::nn {

using functional::Pair2d;
using MaxPool2dOptions = functional::MaxPool2dFuncOptions;
using AvgPool2dOptions = functional::AvgPool2dFuncOptions;

class AdaptiveAvgPool2dOptions {
 public:
  AdaptiveAvgPool2dOptions(Pair2d output_size) : output_size_(output_size) {}  // NOLINT(google-explicit-constructor)
  const Pair2d& output_size() const { return output_size_; }

 private:
  Pair2d output_size_;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(const MaxPool2dOptions& options) : Module("MaxPool2d"), options_(options) {}
  Tensor forward(const Tensor& input) override { return functional::max_pool2d(input, options_); }
  const MaxPool2dOptions& options() const { return options_; }

 private:
  MaxPool2dOptions options_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(const AvgPool2dOptions& options) : Module("AvgPool2d"), options_(options) {}
  Tensor forward(const Tensor& input) override { return functional::avg_pool2d(input, options_); }
  const AvgPool2dOptions& options() const { return options_; }

 private:
  AvgPool2dOptions options_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(const AdaptiveAvgPool2dOptions& options);
  Tensor forward(const Tensor& input) override {
    return functional::adaptive_avg_pool2d(input, options_.output_size());
  }
  const AdaptiveAvgPool2dOptions& options() const { return options_; }

 private:
  AdaptiveAvgPool2dOptions options_;
};

}  // namespace sublet::nn
