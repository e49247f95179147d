#pragma once
// Tensor factories with LibTorch's names. Options default to float32 on the CPU.
// empty/zeros/ones/full take the sizes by value: a braced list becomes the tensor's own sizes.
#include "runtime/generator.h"
#include "runtime/tensor.h"

namespace sublet {

Tensor empty(Shape sizes, TensorOptions options = {});
Tensor zeros(Shape sizes, TensorOptions options = {});
Tensor ones(Shape sizes, TensorOptions options = {});
Tensor full(Shape sizes, double value, TensorOptions options = {});
Tensor empty(Shape sizes, TensorOptions options, MemoryFormat format);
// Same sizes, dtype and device, and the same layout (PyTorch's preserve_format): the strides of
// a dense tensor (e.g. channels-last), else the format it suggests.
Tensor empty_like(const Tensor& like);
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);
// [0, end) and [start, end) by step; int64 unless options set a dtype.
Tensor arange(double end, TensorOptions options = DType::Int64);
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = DType::Int64);
// Uniform in [0, 1), standard normal, uniform in [low, high), normal(mean, stddev).
Tensor rand(const Shape& sizes, Generator& generator = default_generator(), TensorOptions options = {});
Tensor randn(const Shape& sizes, Generator& generator = default_generator(), TensorOptions options = {});
Tensor uniform(const Shape& sizes, double low, double high, Generator& generator = default_generator(),
               TensorOptions options = {});
Tensor normal(const Shape& sizes, double mean, double stddev, Generator& generator = default_generator(),
              TensorOptions options = {});

}  // namespace sublet
