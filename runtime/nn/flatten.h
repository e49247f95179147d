#pragma once
// nn::Flatten, as LibTorch's: flattens dims start_dim..end_dim (default 1..-1, keeping the batch).
// A view when the input's strides allow it, else a copy (Tensor::flatten reshapes).
#include <cstdint>

#include "runtime/nn/module.h"

namespace sublet::nn {

class FlattenOptions {
 public:
  FlattenOptions& start_dim(std::int64_t value) { start_dim_ = value; return *this; }
  FlattenOptions& end_dim(std::int64_t value) { end_dim_ = value; return *this; }
  std::int64_t start_dim() const { return start_dim_; }
  std::int64_t end_dim() const { return end_dim_; }

 private:
  std::int64_t start_dim_ = 1;
  std::int64_t end_dim_ = -1;
};

class Flatten : public Module {
 public:
  explicit Flatten(const FlattenOptions& options = {}) : Module("Flatten"), options_(options) {}
  Tensor forward(const Tensor& input) override;
  const FlattenOptions& options() const { return options_; }

 private:
  FlattenOptions options_;
};

}  // namespace sublet::nn
