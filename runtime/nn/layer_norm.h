#pragma once
// nn::LayerNorm, as LibTorch's (with PyTorch 2.1's bias switch, which nanoGPT uses):
// weight ones and bias zeros of normalized_shape, functional::layer_norm.
//   auto ln = std::make_shared<nn::LayerNorm>(nn::LayerNormOptions({768}));
#include <optional>
#include <vector>

#include "runtime/nn/add_layer_norm.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/module.h"

namespace sublet::nn {

class LayerNormOptions {
 public:
  explicit LayerNormOptions(std::vector<std::int64_t> normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}
  LayerNormOptions& eps(double value) { eps_ = value; return *this; }
  // false: no weight and no bias.
  LayerNormOptions& elementwise_affine(bool value) { elementwise_affine_ = value; return *this; }
  // false: a weight but no bias (only with elementwise_affine).
  LayerNormOptions& bias(bool value) { bias_ = value; return *this; }
  LayerNormOptions& dtype(DType value) { dtype_ = value; return *this; }
  const std::vector<std::int64_t>& normalized_shape() const { return normalized_shape_; }
  double eps() const { return eps_; }
  bool elementwise_affine() const { return elementwise_affine_; }
  bool bias() const { return bias_; }
  DType dtype() const { return dtype_; }

 private:
  std::vector<std::int64_t> normalized_shape_;
  double eps_ = 1e-5;
  bool elementwise_affine_ = true;
  bool bias_ = true;
  DType dtype_ = DType::Float32;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(const LayerNormOptions& options);
  Tensor forward(const Tensor& input) override;
  // forward(input).to(output_dtype) as one call (functional::layer_norm's output_dtype: one kernel
  // on CUDA for a float32 norm with a 16-bit output), with the hooks operator() runs.
  Tensor forward_as(const Tensor& input, DType output_dtype);
  // {residual + branch, forward of that sum (in output_dtype when given)} as
  // functional::add_layer_norm: one kernel each way on CUDA where the dtypes allow. The hooks
  // operator() runs see the residual as the input.
  functional::AddLayerNorm forward_add(const Tensor& residual, const Tensor& branch,
                                       std::optional<DType> output_dtype = std::nullopt);
  const LayerNormOptions& options() const { return options_; }

  Tensor weight;  // normalized_shape, undefined without elementwise_affine
  Tensor bias;    // normalized_shape, undefined without elementwise_affine or bias

 private:
  LayerNormOptions options_;
};

}  // namespace sublet::nn
