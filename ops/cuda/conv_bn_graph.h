#pragma once
// cuDNN operation graphs that fold a batch norm into the convolutions around it, the fusions of
// NVIDIA's ResNet-50 training: the convolution's prologue applies the previous batch norm's
// per-channel scale and bias and the ReLU to its input (so the normalised activation is never
// written), its epilogue sums each output channel and its square (GenStats, so the next batch
// norm needs no statistics pass), and the backward passes fold the ReLU mask and the batch
// norm's weight gradients into the data gradient. Each pattern is one graph; whether cuDNN has an
// engine for it on this GPU, cuDNN version, shape and dtype is found out at run time
// (bench/kernels/cudnn_fusion_probe.cpp reports it for ResNet-50's layers).
//
// Names follow the convolution's forward pass: x is the convolution's input, y its output, w its
// weight; dy and dx their gradients. "x" of a prologue pattern is the previous layer's output
// before its batch norm (the tensor the forward keeps instead of the normalised one).
#include <cudnn.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "ops/conv2d.h"
#include "ops/cuda/cudnn_backend.h"

namespace sublet::ops::cuda {

enum class ConvBnPattern : int {
  Forward,                       // y = conv(x, w)
  ScaleBiasReluForward,          // y = conv(relu(x * scale + bias), w)
  ForwardGenStats,               // y = conv(x, w); sum and sqsum of y per channel
  ScaleBiasReluForwardGenStats,  // both of the above (MLPerf's ConvBNfprop)
  BackwardData,                  // dx = dgrad(dy, w)
  BackwardDataDrelu,             // dx = dgrad(dy, w) where relu_x > 0, else 0
  BackwardDataScaleBiasDrelu,    // dx = dgrad(dy, w) where x * scale + bias > 0, else 0
  // dx = dgrad(dy, w) where (x - mean) * inv_std * scale + bias > 0, else 0; and the batch norm's
  // dscale, dbias and the equivalent scales of its input gradient from dx (MLPerf's
  // DgradDreluBNBwdWeight)
  BackwardDataDreluBnBwdWeights,
  BackwardFilter,             // dw = wgrad(x, dy)
  ScaleBiasReluBackwardFilter,  // dw = wgrad(relu(x * scale + bias), dy) (MLPerf's ConvBNwgrad)
};
inline constexpr int kConvBnPatternCount = 10;

const char* conv_bn_pattern_name(ConvBnPattern pattern);
// The unfused pass a pattern is measured against (Forward, BackwardData or BackwardFilter).
ConvBnPattern conv_bn_plain_pattern(ConvBnPattern pattern);

// The unique ids of the graphs' bound tensors; the variant pack binds pointers to them.
enum ConvBnUid : std::int64_t {
  kConvBnX = 1,
  kConvBnW,
  kConvBnY,
  kConvBnScale,  // per channel of x (prologue) or of the batch norm (dBN)
  kConvBnBias,
  kConvBnSum,  // per channel of y, float32
  kConvBnSqSum,
  kConvBnDy,
  kConvBnDx,
  kConvBnReluX,  // the forward ReLU's input, x's shape
  kConvBnMean,   // float32 per channel of x
  kConvBnInvStd,
  kConvBnDScale,  // float32 outputs of the batch norm weight gradient
  kConvBnDBias,
  kConvBnEqDyScale,
  kConvBnEqXScale,
  kConvBnEqBias,
};

struct ConvBnGraphOptions {
  // The prologue's scale and bias in float32 (else in the activations' dtype).
  bool float_scale_bias = false;
  // The byte alignment every bound tensor's address has.
  std::int64_t alignment = 16;
};

// A tensor the graph reads or writes, with its size.
struct ConvBnBoundTensor {
  std::int64_t uid = 0;
  std::int64_t numel = 0;
  std::size_t element_bytes = 0;
  bool written = false;
};

struct ConvBnGraph {
  ConvBnPattern pattern = ConvBnPattern::Forward;
  // The operations (kept alive with the graph) and the graph itself.
  std::vector<BackendDescriptor> operations;
  BackendDescriptor graph{CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR};
  cudnnStatus_t status = CUDNN_STATUS_NOT_INITIALIZED;  // the graph's finalize
  std::vector<ConvBnBoundTensor> bound;
};

// Builds the pattern's graph for the shape and dtype (16-bit or float32 activations). Throws
// CudaError when cuDNN refuses one of its descriptors; a graph cuDNN refuses as a whole comes back
// with its status.
ConvBnGraph build_conv_bn_graph(cudnnHandle_t handle, ConvBnPattern pattern, const Conv2dShape& shape, DType dtype,
                                const ConvBnGraphOptions& options = {});

}  // namespace sublet::ops::cuda
