#pragma once
// Owning wrappers of the cuDNN descriptors the NN ops use: created in the constructor, destroyed
// in the destructor, so an exception between the two never leaks one.
#include <cudnn.h>

#include <climits>
#include <cstdint>
#include <string>

#include "core/errors.h"
#include "ops/cuda/cuda_checks.h"
#include "core/dtype.h"

namespace sublet::ops::cuda {

inline cudnnDataType_t cudnn_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    default: throw DTypeError(std::string("cuDNN ops: expected float32 or float64, got ") + dtype_name(dtype));
  }
}

// The legacy cuDNN API counts in int.
inline int cudnn_int(std::int64_t value, const char* op, const char* what) {
  if (value < 0 || value > INT_MAX) {
    throw ShapeError(std::string(op) + ": " + what + " " + std::to_string(value) + " does not fit cuDNN's 32-bit int");
  }
  return static_cast<int>(value);
}

class TensorDescriptor {
 public:
  // A packed NCHW tensor.
  TensorDescriptor(DType dtype, int n, int c, int h, int w) {
    SUBLET_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_));
    const cudnnStatus_t status = cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NCHW, cudnn_type(dtype), n, c, h, w);
    if (status != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyTensorDescriptor(desc_);
      SUBLET_CUDNN_CHECK(status);
    }
  }
  TensorDescriptor() { SUBLET_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_)); }
  ~TensorDescriptor() { cudnnDestroyTensorDescriptor(desc_); }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class FilterDescriptor {
 public:
  FilterDescriptor(DType dtype, int k, int c, int h, int w) {
    SUBLET_CUDNN_CHECK(cudnnCreateFilterDescriptor(&desc_));
    const cudnnStatus_t status = cudnnSetFilter4dDescriptor(desc_, cudnn_type(dtype), CUDNN_TENSOR_NCHW, k, c, h, w);
    if (status != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyFilterDescriptor(desc_);
      SUBLET_CUDNN_CHECK(status);
    }
  }
  ~FilterDescriptor() { cudnnDestroyFilterDescriptor(desc_); }
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor() { SUBLET_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&desc_)); }
  ~ConvolutionDescriptor() { cudnnDestroyConvolutionDescriptor(desc_); }
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  cudnnConvolutionDescriptor_t get() const { return desc_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

}  // namespace sublet::ops::cuda
