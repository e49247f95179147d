#pragma once
// nn::Conv2d, as LibTorch's: nn::Conv2d(nn::Conv2dOptions(3, 64, 3).stride(1).padding(1).bias(false)).
// Initialisation is PyTorch's default (reset_parameters): weight kaiming_uniform with a = sqrt(5),
// i.e. U(+-1/sqrt(fan_in)), bias U(+-1/sqrt(fan_in)), drawn from the generator passed in, so
// that a model built from the same seed is identical.
#include <cstdint>

#include "runtime/generator.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/module.h"

namespace sublet::nn {

using functional::Pair2d;

class Conv2dOptions {
 public:
  Conv2dOptions(std::int64_t in_channels, std::int64_t out_channels, Pair2d kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  Conv2dOptions& stride(Pair2d value) { stride_ = value; return *this; }
  Conv2dOptions& padding(Pair2d value) { padding_ = value; return *this; }
  Conv2dOptions& dilation(Pair2d value) { dilation_ = value; return *this; }
  Conv2dOptions& groups(std::int64_t value) { groups_ = value; return *this; }
  Conv2dOptions& bias(bool value) { bias_ = value; return *this; }
  Conv2dOptions& dtype(DType value) { dtype_ = value; return *this; }

  std::int64_t in_channels() const { return in_channels_; }
  std::int64_t out_channels() const { return out_channels_; }
  const Pair2d& kernel_size() const { return kernel_size_; }
  const Pair2d& stride() const { return stride_; }
  const Pair2d& padding() const { return padding_; }
  const Pair2d& dilation() const { return dilation_; }
  std::int64_t groups() const { return groups_; }
  bool bias() const { return bias_; }
  DType dtype() const { return dtype_; }

 private:
  std::int64_t in_channels_, out_channels_;
  Pair2d kernel_size_;
  Pair2d stride_ = 1, padding_ = 0, dilation_ = 1;
  std::int64_t groups_ = 1;
  bool bias_ = true;
  DType dtype_ = DType::Float32;
};

class Conv2d : public Module {
 public:
  explicit Conv2d(const Conv2dOptions& options, Generator& generator = default_generator());
  Tensor forward(const Tensor& input) override;
  const Conv2dOptions& options() const { return options_; }

  Tensor weight;  // [out_channels, in_channels / groups, kh, kw]
  Tensor bias;    // [out_channels], undefined without bias

 private:
  Conv2dOptions options_;
};

}  // namespace sublet::nn
