#pragma once
// conv2d through cuDNN's graph (backend) API: the descriptors PyTorch's cuDNN v8 path builds
// with cudnn_frontend. One operation graph per (thread, device, dtype, shape, pass, pointer
// alignment); its engine configurations come from the heuristics (mode A, then the fallback
// list), filtered as PyTorch filters them (no down-converted inputs; no tensor-core math for
// float32 unless ops::conv_algorithm_settings().allow_tf32; deterministic engines only unless
// the settings ask for benchmarking), and - with settings.benchmark - each of the first
// settings.benchmark_limit is timed once on the real operands, fastest first, as
// torch.backends.cudnn.benchmark with its benchmark_limit.
//
// Why not only the legacy API (cudnnFind*Ex): it reaches a fixed set of older kernels, whose
// fastest picks run ResNet-50's convolutions far slower than the engines PyTorch's graph-API
// path gets.
//
// Plans are cached per thread, because each thread has its own cuDNN handle (ops/cuda/handles.h)
// and a plan is built for one handle. Workspaces come from ctx.workspace() and go back right
// after the call is enqueued.
#include <cudnn.h>

#include <array>
#include <cstdint>

#include "ops/context.h"
#include "ops/cuda/cudnn_backend.h"
#include "ops/conv2d.h"
#include "core/dtype.h"

namespace sublet::ops::cuda {

enum class ConvPass : int { Forward, BackwardData, BackwardFilter };

// What a cached algorithm or plan choice depends on: device, dtype, pass, every shape field (the
// memory format included) and the algorithm settings. Shared by this file's plan cache and the
// legacy API's algorithm cache.
using ConvChoiceKey = std::array<std::int64_t, 20>;
ConvChoiceKey conv_choice_key(const Context& ctx, const Conv2dShape& s, DType dtype, ConvPass pass);

// Operand types and layouts: ops/cuda/conv2d_layout.h (16-bit operands accumulate in float32;
// channels-last operands are described by their NHWC / KRSC strides).
// The three operands of a pass, in cuDNN's naming: x (input), w (weight), y (output). The pass
// writes one of them: y for Forward, x (dx) for BackwardData, w (dw) for BackwardFilter.
struct ConvGraphOperands {
  void* x = nullptr;
  void* w = nullptr;
  void* y = nullptr;
};

// Enqueues the pass on ctx.stream and returns true; returns false, having enqueued nothing,
// when the graph API has no usable engine for this shape and dtype (the caller then uses the
// legacy API). Throws OutOfMemoryError when no engine's workspace can be allocated, and
// CudaError for any other cuDNN failure. Call with ctx.device current.
// `accumulate`: the pass adds to its output instead of overwriting it (beta = 1; a plan of its
// own, and benchmarking times it on scratch memory so that the sum is made once).
bool conv2d_graph_run(const Context& ctx, cudnnHandle_t handle, const Conv2dShape& shape, DType dtype,
                      ConvPass pass, const ConvGraphOperands& operands, bool accumulate = false);

// The finalized convolution descriptor of the shape (cross-correlation, the shape's stride,
// padding and dilation; float32 accumulation for 16-bit dtypes). Shared with the fused
// convolution + batch norm graphs (ops/cuda/conv_bn_graph.h).
BackendDescriptor convolution_descriptor(const Conv2dShape& s, DType dtype);

}  // namespace sublet::ops::cuda
