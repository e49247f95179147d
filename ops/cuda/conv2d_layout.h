#pragma once
// What the cuDNN convolution (ops/cuda/conv2d_cuda.cpp, conv2d_graph.cpp) needs to know about an
// operand's dtype and memory format, in one place for the graph API and the legacy API:
// - Types: every operand of a pass (input, weight, bias, output and their gradients) has the
//   call's dtype. float32 and float64 compute in their own type; bfloat16 and float16 compute in
//   float32 (cuDNN's PSEUDO_BFLOAT16 / PSEUDO_HALF configurations), as PyTorch's cuDNN path.
// - Layouts (ops/conv2d.h): Contiguous is NCHW-dense with an [OC, C/g, KH, KW] weight;
//   ChannelsLast is NHWC-dense activations with an [OC, KH, KW, C/g] weight. cuDNN always takes
//   the logical (N, C, H, W) / (K, C, R, S) dims plus the strides, so a channels-last call runs
//   cuDNN's NHWC kernels directly, with no transposes.
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/errors.h"
#include "ops/conv2d.h"
#include "ops/cuda/cuda_checks.h"

namespace sublet::ops::cuda {

inline bool conv_is_half(DType dtype) { return dtype == DType::BFloat16 || dtype == DType::Float16; }

// The dtypes the CUDA convolution serves; DTypeError naming conv2d otherwise.
inline void conv_check_dtype(DType dtype, MemoryFormat format) {
  const bool supported = dtype == DType::Float32 || dtype == DType::Float64 || conv_is_half(dtype);
  if (!supported) {
    throw DTypeError(std::string("conv2d (cuda, ") + memory_format_name(format) +
                     "): expected float32, float64, bfloat16 or float16, got " + dtype_name(dtype));
  }
}

inline cudnnDataType_t conv_data_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    case DType::Float16: return CUDNN_DATA_HALF;
    default: break;
  }
  throw DTypeError(std::string("conv2d (cuDNN): no cuDNN type for ") + dtype_name(dtype));
}

// The accumulation type: float64 for float64, float32 for everything else.
inline cudnnDataType_t conv_compute_type(DType dtype) {
  return dtype == DType::Float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

// Strides of a dense 4-d tensor whose logical dims are (N, C, H, W) (or (K, C, R, S) for a
// weight): NCHW-dense for Contiguous, NHWC-dense (C fastest) for ChannelsLast.
inline std::array<std::int64_t, 4> conv_strides(const std::array<std::int64_t, 4>& dims, MemoryFormat format) {
  if (format == MemoryFormat::ChannelsLast) {
    return {dims[1] * dims[2] * dims[3], 1, dims[3] * dims[1], dims[1]};
  }
  return {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
}

inline cudnnTensorFormat_t conv_tensor_format(MemoryFormat format) {
  return format == MemoryFormat::ChannelsLast ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

// "conv2d forward (bfloat16, channels_last, input [2, 4, 9, 8], weight [6, 2, 3, 2], stride 2x1,
// padding 1x1, dilation 2x1, groups 2)": prefixes a failure's message, so an error on the GPU
// machine names the op, dtype, layout and shape without a rerun.
inline std::string conv_call_text(const char* pass, const Conv2dShape& s, DType dtype) {
  const auto n = [](std::int64_t v) { return std::to_string(v); };
  return std::string("conv2d ") + pass + " (" + dtype_name(dtype) + ", " + memory_format_name(s.format) +
         ", input [" + n(s.batch) + ", " + n(s.in_channels) + ", " + n(s.in_height) + ", " + n(s.in_width) +
         "], weight [" + n(s.out_channels) + ", " + n(s.groups > 0 ? s.in_channels / s.groups : 0) + ", " +
         n(s.kernel_h) + ", " + n(s.kernel_w) + "], stride " + n(s.stride_h) + "x" + n(s.stride_w) + ", padding " +
         n(s.pad_h) + "x" + n(s.pad_w) + ", dilation " + n(s.dilation_h) + "x" + n(s.dilation_w) + ", groups " +
         n(s.groups) + ")";
}

// A legacy-API filter descriptor of any conv dtype and format: (K, C/g, R, S) dims; NHWC format
// means the KRSC layout of a channels-last weight.
class ConvFilterDescriptor {
 public:
  ConvFilterDescriptor(DType dtype, MemoryFormat format, int k, int c, int h, int w) {
    SUBLET_CUDNN_CHECK(cudnnCreateFilterDescriptor(&desc_));
    const cudnnStatus_t status =
        cudnnSetFilter4dDescriptor(desc_, conv_data_type(dtype), conv_tensor_format(format), k, c, h, w);
    if (status != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyFilterDescriptor(desc_);
      SUBLET_CUDNN_CHECK(status);
    }
  }
  ~ConvFilterDescriptor() { cudnnDestroyFilterDescriptor(desc_); }
  ConvFilterDescriptor(const ConvFilterDescriptor&) = delete;
  ConvFilterDescriptor& operator=(const ConvFilterDescriptor&) = delete;
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

// A legacy-API tensor descriptor of any conv dtype and format (logical N, C, H, W dims).
class ConvTensorDescriptor {
 public:
  ConvTensorDescriptor(DType dtype, MemoryFormat format, int n, int c, int h, int w) {
    SUBLET_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_));
    const cudnnStatus_t status =
        cudnnSetTensor4dDescriptor(desc_, conv_tensor_format(format), conv_data_type(dtype), n, c, h, w);
    if (status != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyTensorDescriptor(desc_);
      SUBLET_CUDNN_CHECK(status);
    }
  }
  ~ConvTensorDescriptor() { cudnnDestroyTensorDescriptor(desc_); }
  ConvTensorDescriptor(const ConvTensorDescriptor&) = delete;
  ConvTensorDescriptor& operator=(const ConvTensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

}  // namespace sublet::ops::cuda
