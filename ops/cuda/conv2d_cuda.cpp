// conv2d on cuDNN: the graph API first (ops/cuda/conv2d_graph.h: the engines PyTorch gets), the
// legacy convolution API below for what the graph API has no engine for (e.g. some float64
// shapes) and for the bias terms.
// - Algorithms: asked once per (device, dtype, shape, pass) from cudnnGet*Algorithm_v7 (the
//   heuristics: nothing runs, no memory is taken) and cached; the ranked list is kept so that a
//   workspace the allocator cannot supply falls through to the next algorithm.
// - Precision: float32 uses CUDNN_FMA_MATH only, unless ops::conv_algorithm_settings().allow_tf32
//   (PyTorch's default). TF32 rounds inputs to a 10-bit mantissa, which would put GPU results
//   ~1e-3 away from the CPU's.
// - With the heuristics, deterministic algorithms are preferred, so two runs of a step give the
//   same bits. With settings.benchmark, every algorithm is timed once per shape (cudnnFind*Ex)
//   and the fastest is used, as PyTorch's cudnn.benchmark.
// - Workspaces come from ctx.workspace() and go back right after the call (stream-ordered).
// - bfloat16 / float16: 16-bit operands, float32 accumulation (ops/cuda/conv2d_layout.h), any
//   math cuDNN proposes (tensor cores); the bias terms in ops/cuda/conv2d_bias.h (float32 sums).
// - Channels-last (shape.format): the same calls with NHWC / KRSC descriptors, so cuDNN runs its
//   NHWC kernels on the buffers as they are; bias terms again in ops/cuda/conv2d_bias.h.
//   float32/float64 NCHW keep cuDNN's own bias calls (cudnnAddTensor, BackwardBias).
// - Convolutions where one kernel tap meets the whole input (a 3x3 padding-1 convolution on a
//   1x1 plane) are GEMMs on cuBLAS instead (ops/cuda/conv2d_single_tap.h).
// - Channels-last float32 convolutions of fewer than 8 input channels (an image's stem) run
//   forward and weight gradient as im2col + a cuBLAS GEMM (ops/cuda/conv2d_im2col.h); 16-bit
//   ones can run cuDNN on channel-padded copies of their operands (ops/cuda/conv2d_channel_pad.h,
//   selected by TuningOptions::conv_pad_channels).
#include "ops/cuda/conv2d_cuda.h"
#include "ops/cuda/conv2d_bias.h"
#include "ops/cuda/conv2d_channel_pad.h"
#include "ops/cuda/conv2d_graph.h"
#include "ops/cuda/conv2d_im2col.h"
#include "ops/cuda/conv2d_layout.h"
#include "ops/cuda/conv2d_single_tap.h"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <vector>

#include "core/errors.h"
#include "core/tuning.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/cudnn_descriptors.h"
#include "memory/cuda_device_guard.h"
#include "ops/conv_settings.h"
#include "ops/cuda/handles.h"

namespace sublet::ops::cuda {
namespace {

struct ConvDescriptors {
  ConvTensorDescriptor input, output;
  ConvFilterDescriptor weight;
  ConvolutionDescriptor conv;

  ConvDescriptors(const Conv2dShape& s, DType dtype)
      : input(dtype, s.format, cudnn_int(s.batch, "conv2d", "batch"), cudnn_int(s.in_channels, "conv2d", "in_channels"),
              cudnn_int(s.in_height, "conv2d", "height"), cudnn_int(s.in_width, "conv2d", "width")),
        output(dtype, s.format, cudnn_int(s.batch, "conv2d", "batch"),
               cudnn_int(s.out_channels, "conv2d", "out_channels"), cudnn_int(s.out_height(), "conv2d", "output height"),
               cudnn_int(s.out_width(), "conv2d", "output width")),
        weight(dtype, s.format, cudnn_int(s.out_channels, "conv2d", "out_channels"),
               cudnn_int(s.in_channels / s.groups, "conv2d", "in_channels per group"),
               cudnn_int(s.kernel_h, "conv2d", "kernel height"), cudnn_int(s.kernel_w, "conv2d", "kernel width")) {
    for (std::int64_t numel : {s.input_numel(), s.output_numel(), s.weight_numel()}) {
      cudnn_int(numel, "conv2d", "tensor size");
    }
    SUBLET_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        conv.get(), cudnn_int(s.pad_h, "conv2d", "padding"), cudnn_int(s.pad_w, "conv2d", "padding"),
        cudnn_int(s.stride_h, "conv2d", "stride"), cudnn_int(s.stride_w, "conv2d", "stride"),
        cudnn_int(s.dilation_h, "conv2d", "dilation"), cudnn_int(s.dilation_w, "conv2d", "dilation"),
        CUDNN_CROSS_CORRELATION, conv_compute_type(dtype)));
    SUBLET_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv.get(), cudnn_int(s.groups, "conv2d", "groups")));
    const bool exact_float32 = dtype == DType::Float32 && !conv_algorithm_settings().allow_tf32;
    const cudnnMathType_t math =
        exact_float32 ? CUDNN_FMA_MATH : conv_is_half(dtype) ? CUDNN_TENSOR_OP_MATH : CUDNN_DEFAULT_MATH;
    SUBLET_CUDNN_CHECK(cudnnSetConvolutionMathType(conv.get(), math));
    // cuDNN and ops/conv2d.h must agree on the output size, or the buffers do not fit.
    int n = 0, c = 0, h = 0, w = 0;
    SUBLET_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv.get(), input.get(), weight.get(), &n, &c, &h, &w));
    if (n != s.batch || c != s.out_channels || h != s.out_height() || w != s.out_width()) {
      throw ShapeError("conv2d: cuDNN computes output [" + std::to_string(n) + ", " + std::to_string(c) + ", " +
                       std::to_string(h) + ", " + std::to_string(w) + "], ops/conv2d.h expects [" +
                       std::to_string(s.batch) + ", " + std::to_string(s.out_channels) + ", " +
                       std::to_string(s.out_height()) + ", " + std::to_string(s.out_width()) + "]");
    }
  }
};

// cuDNN's scaling factors alpha = 1, beta = 0: double for float64 data, float for every other
// type (16-bit included).
struct Scaling {
  explicit Scaling(DType dtype) : is_double(dtype == DType::Float64) {}
  const void* one() const { return is_double ? static_cast<const void*>(&d_one) : &f_one; }
  const void* zero() const { return is_double ? static_cast<const void*>(&d_zero) : &f_zero; }

  bool is_double;
  float f_one = 1.0f, f_zero = 0.0f;
  double d_one = 1.0, d_zero = 0.0;
};

// float32/float64 NCHW keep cuDNN's bias calls; 16-bit and channels-last use ops/cuda/conv2d_bias.h.
bool cudnn_bias(const Conv2dShape& s, DType dtype) {
  return !conv_is_half(dtype) && s.format == MemoryFormat::Contiguous;
}

// The NCHW output and [1, OC, 1, 1] bias descriptors of cuDNN's bias calls.
struct BiasDescriptors {
  ConvTensorDescriptor output, bias;
  BiasDescriptors(const Conv2dShape& s, DType dtype)
      : output(dtype, MemoryFormat::Contiguous, cudnn_int(s.batch, "conv2d", "batch"),
               cudnn_int(s.out_channels, "conv2d", "out_channels"), cudnn_int(s.out_height(), "conv2d", "output height"),
               cudnn_int(s.out_width(), "conv2d", "output width")),
        bias(dtype, MemoryFormat::Contiguous, 1, cudnn_int(s.out_channels, "conv2d", "out_channels"), 1, 1) {}
};

// One algorithm of any pass (the three cuDNN enums fit in an int) and the math mode it wants.
struct AlgorithmChoice {
  int algorithm = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

// Measured results (cudnnFind*Ex) come fastest first: keep that order, dropping failures and,
// for exact float32, anything but FMA math.
template <typename Perf>
std::vector<AlgorithmChoice> fastest_first(const Perf* results, int count, DType dtype) {
  const bool exact_float32 = dtype == DType::Float32 && !conv_algorithm_settings().allow_tf32;
  std::vector<AlgorithmChoice> ranked;
  for (int i = 0; i < count; ++i) {
    const Perf& p = results[i];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    if (exact_float32 && p.mathType != CUDNN_FMA_MATH) continue;
    ranked.push_back({static_cast<int>(p.algo), p.mathType});
  }
  return ranked;
}

// Keeps the usable results in cuDNN's ranking, deterministic ones first.
template <typename Perf>
std::vector<AlgorithmChoice> usable(const Perf* results, int count, DType dtype) {
  if (dtype == DType::Float32 && conv_algorithm_settings().allow_tf32) {
    // TF32 allowed: cuDNN's own ranking, math modes as it proposes them.
    std::vector<AlgorithmChoice> ranked = fastest_first(results, count, dtype);
    if (ranked.empty()) throw CudaError("conv2d: cuDNN offers no algorithm for this shape");
    return ranked;
  }
  std::vector<AlgorithmChoice> fma, any;
  std::vector<bool> fma_deterministic, any_deterministic;
  for (int i = 0; i < count; ++i) {
    const Perf& p = results[i];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    const AlgorithmChoice choice{static_cast<int>(p.algo), p.mathType};
    any.push_back(choice);
    any_deterministic.push_back(p.determinism == CUDNN_DETERMINISTIC);
    if (p.mathType == CUDNN_FMA_MATH) {
      fma.push_back(choice);
      fma_deterministic.push_back(p.determinism == CUDNN_DETERMINISTIC);
    }
  }
  // Float32 must not use tensor-core (TF32) math; only when cuDNN offers no FMA kernel at all
  // do the others remain, forced to FMA math when run.
  const bool strict = dtype == DType::Float32 && !fma.empty();
  std::vector<AlgorithmChoice>& pool = strict ? fma : any;
  std::vector<bool>& deterministic = strict ? fma_deterministic : any_deterministic;
  std::vector<AlgorithmChoice> ranked;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i = 0; i < pool.size(); ++i) {
      if (deterministic[i] == (pass == 0)) ranked.push_back(pool[i]);
    }
  }
  if (dtype == DType::Float32) {
    for (auto& choice : ranked) choice.math = CUDNN_FMA_MATH;
  }
  if (ranked.empty()) throw CudaError("conv2d: cuDNN offers no algorithm for this shape");
  return ranked;
}

std::vector<AlgorithmChoice> query_algorithms(cudnnHandle_t handle, const ConvDescriptors& d, DType dtype,
                                              ConvPass pass) {
  int count = 0;
  switch (pass) {
    case ConvPass::Forward: {
      std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> results{};
      SUBLET_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, d.input.get(), d.weight.get(), d.conv.get(),
                                                                d.output.get(), static_cast<int>(results.size()),
                                                                &count, results.data()));
      return usable(results.data(), count, dtype);
    }
    case ConvPass::BackwardData: {
      std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> results{};
      SUBLET_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, d.weight.get(), d.output.get(),
                                                                     d.conv.get(), d.input.get(),
                                                                     static_cast<int>(results.size()), &count,
                                                                     results.data()));
      return usable(results.data(), count, dtype);
    }
    case ConvPass::BackwardFilter: {
      std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> results{};
      SUBLET_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, d.input.get(), d.output.get(),
                                                                       d.conv.get(), d.weight.get(),
                                                                       static_cast<int>(results.size()), &count,
                                                                       results.data()));
      return usable(results.data(), count, dtype);
    }
  }
  return {};
}

// The operands of one call, for timing algorithms on real data (cudnnFind*Ex writes only the
// pass's output, which the call overwrites right after).
struct ConvOperands {
  const void* x = nullptr;   // forward / backward-filter input
  const void* w = nullptr;   // forward / backward-data weight
  const void* dy = nullptr;  // backward gradient of the output
  void* out = nullptr;       // y, dx or dw
};

std::size_t workspace_size(cudnnHandle_t handle, const ConvDescriptors& d, ConvPass pass, int algorithm);

// Times every algorithm on this shape with the largest workspace the allocator can give (at most
// what the heuristics' candidates ask for, capped at 1 GiB), fastest first.
std::vector<AlgorithmChoice> measure_algorithms(const Context& ctx, cudnnHandle_t handle, const ConvDescriptors& d,
                                                DType dtype, ConvPass pass, const ConvOperands& io) {
  std::size_t wanted = 0;
  for (const AlgorithmChoice& c : query_algorithms(handle, d, dtype, pass))
    wanted = std::max(wanted, workspace_size(handle, d, pass, c.algorithm));
  wanted = std::min<std::size_t>(wanted, std::size_t{1} << 30);
  memory::ScopedBlock workspace;
  while (wanted > 0) {
    try {
      workspace = ctx.workspace(wanted);
      break;
    } catch (const OutOfMemoryError&) {
      wanted /= 2;
    }
  }
  int count = 0;
  switch (pass) {
    case ConvPass::Forward: {
      std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> results{};
      SUBLET_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
          handle, d.input.get(), io.x, d.weight.get(), io.w, d.conv.get(), d.output.get(), io.out,
          static_cast<int>(results.size()), &count, results.data(), workspace.get(), wanted));
      return fastest_first(results.data(), count, dtype);
    }
    case ConvPass::BackwardData: {
      std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> results{};
      SUBLET_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
          handle, d.weight.get(), io.w, d.output.get(), io.dy, d.conv.get(), d.input.get(), io.out,
          static_cast<int>(results.size()), &count, results.data(), workspace.get(), wanted));
      return fastest_first(results.data(), count, dtype);
    }
    case ConvPass::BackwardFilter: {
      std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> results{};
      SUBLET_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
          handle, d.input.get(), io.x, d.output.get(), io.dy, d.conv.get(), d.weight.get(), io.out,
          static_cast<int>(results.size()), &count, results.data(), workspace.get(), wanted));
      return fastest_first(results.data(), count, dtype);
    }
  }
  return {};
}

// The ranked algorithms for this shape, computed on the first call only.
std::vector<AlgorithmChoice> algorithms_for(const Context& ctx, cudnnHandle_t handle, const ConvDescriptors& d,
                                            const Conv2dShape& s, DType dtype, ConvPass pass,
                                            const ConvOperands& io) {
  static std::mutex mutex;
  static std::map<ConvChoiceKey, std::vector<AlgorithmChoice>> cache;
  const ConvChoiceKey key = conv_choice_key(ctx, s, dtype, pass);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = cache.find(key);
    if (found != cache.end()) return found->second;
  }
  // Outside the lock: it may take a while. Measured choices fall back to the heuristics' list.
  std::vector<AlgorithmChoice> ranked;
  if (conv_algorithm_settings().benchmark) {
    ranked = measure_algorithms(ctx, handle, d, dtype, pass, io);
    // Timing used a workspace far larger than any step needs: give its segment back now, as
    // PyTorch does after cudnnFind, so it does not stay in the reserved memory for good.
    ctx.allocator->empty_cache();
  }
  if (ranked.empty()) ranked = query_algorithms(handle, d, dtype, pass);
  std::lock_guard<std::mutex> lock(mutex);
  return cache.emplace(key, std::move(ranked)).first->second;
}

std::size_t workspace_size(cudnnHandle_t handle, const ConvDescriptors& d, ConvPass pass, int algorithm) {
  std::size_t bytes = 0;
  switch (pass) {
    case ConvPass::Forward:
      SUBLET_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, d.input.get(), d.weight.get(), d.conv.get(),
                                                                 d.output.get(),
                                                                 static_cast<cudnnConvolutionFwdAlgo_t>(algorithm),
                                                                 &bytes));
      break;
    case ConvPass::BackwardData:
      SUBLET_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
          handle, d.weight.get(), d.output.get(), d.conv.get(), d.input.get(),
          static_cast<cudnnConvolutionBwdDataAlgo_t>(algorithm), &bytes));
      break;
    case ConvPass::BackwardFilter:
      SUBLET_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
          handle, d.input.get(), d.output.get(), d.conv.get(), d.weight.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algorithm), &bytes));
      break;
  }
  return bytes;
}

// Runs `run(algorithm, workspace, bytes)` with the first ranked algorithm whose workspace the
// allocator can supply. The workspace is released as soon as the call is enqueued.
template <typename Run>
void with_algorithm(const Context& ctx, cudnnHandle_t handle, const ConvDescriptors& d, const Conv2dShape& s,
                    DType dtype, ConvPass pass, const ConvOperands& io, Run&& run) {
  const auto ranked = algorithms_for(ctx, handle, d, s, dtype, pass, io);
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    const AlgorithmChoice& choice = ranked[i];
    SUBLET_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv.get(), choice.math));
    const std::size_t bytes = workspace_size(handle, d, pass, choice.algorithm);
    memory::ScopedBlock workspace;
    if (bytes > 0) {
      try {
        workspace = ctx.workspace(bytes);
      } catch (const OutOfMemoryError&) {
        if (i + 1 == ranked.size()) throw;  // no cheaper algorithm left: report the OOM
        continue;
      }
    }
    run(choice.algorithm, workspace.get(), bytes);
    return;
  }
}

bool single_tap(const Conv2dShape& s, DType dtype) { return conv2d_single_tap_applies(s, dtype); }

bool im2col(const Conv2dShape& s, DType dtype) { return conv2d_im2col_applies(s, dtype); }

// The input channels the operands are zero-padded to (ops/cuda/conv2d_channel_pad.h), 0 for none.
std::int64_t padded_channels(const Conv2dShape& s, DType dtype) {
  return conv2d_padded_channels(s, dtype, tuning().conv_pad_channels);
}

// Rows of a channels-last activation [N, H, W, C] and of a weight [K, R, S, C] (groups 1).
std::int64_t input_rows(const Conv2dShape& s) { return s.batch * s.in_height * s.in_width; }
std::int64_t weight_rows(const Conv2dShape& s) { return s.out_channels * s.kernel_h * s.kernel_w; }

// The convolutions written as cuBLAS GEMMs (single tap, im2col): whether one took the pass.
bool gemm_forward(const Context& ctx, const Conv2dShape& s, DType dtype, const void* input, const void* weight,
                  void* output) {
  if (single_tap(s, dtype)) {
    conv2d_single_tap_forward(ctx, s, dtype, input, weight, output);
    return true;
  }
  if (im2col(s, dtype)) {
    conv2d_im2col_forward(ctx, s, dtype, input, weight, output);
    return true;
  }
  return false;
}

bool gemm_backward_weight(const Context& ctx, const Conv2dShape& s, DType dtype, const void* grad_output,
                          const void* input, void* grad_weight) {
  if (single_tap(s, dtype)) {
    conv2d_single_tap_backward_weight(ctx, s, dtype, grad_output, input, grad_weight);
    return true;
  }
  if (im2col(s, dtype)) {
    conv2d_im2col_backward_weight(ctx, s, dtype, grad_output, input, grad_weight);
    return true;
  }
  return false;
}

// The cuDNN passes proper (graph API, else the legacy API) on the operands as given.
void cudnn_forward(const Context& ctx, cudnnHandle_t handle, const Conv2dShape& s, DType dtype, const void* input,
                   const void* weight, void* output) {
  if (conv2d_graph_run(ctx, handle, s, dtype, ConvPass::Forward,
                       {const_cast<void*>(input), const_cast<void*>(weight), output})) {
    return;
  }
  ConvDescriptors d(s, dtype);
  const Scaling scale(dtype);
  with_algorithm(ctx, handle, d, s, dtype, ConvPass::Forward, ConvOperands{input, weight, nullptr, output},
                 [&](int algorithm, void* workspace, std::size_t bytes) {
    SUBLET_CUDNN_CHECK(cudnnConvolutionForward(handle, scale.one(), d.input.get(), input, d.weight.get(), weight,
                                               d.conv.get(), static_cast<cudnnConvolutionFwdAlgo_t>(algorithm),
                                               workspace, bytes, scale.zero(), d.output.get(), output));
  });
}

// Accumulating (grad_input += ...): cuDNN's graph API takes beta = 1; the legacy API is left out
// (its algorithm search would write into the sum), so false there, having enqueued nothing.
bool cudnn_backward_input(const Context& ctx, cudnnHandle_t handle, const Conv2dShape& s, DType dtype,
                          const void* grad_output, const void* weight, void* grad_input, bool accumulate) {
  if (conv2d_graph_run(ctx, handle, s, dtype, ConvPass::BackwardData,
                       {grad_input, const_cast<void*>(weight), const_cast<void*>(grad_output)}, accumulate)) {
    return true;
  }
  if (accumulate) return false;
  ConvDescriptors d(s, dtype);
  const Scaling scale(dtype);
  with_algorithm(ctx, handle, d, s, dtype, ConvPass::BackwardData,
                 ConvOperands{nullptr, weight, grad_output, grad_input}, [&](int algorithm, void* workspace, std::size_t bytes) {
                   SUBLET_CUDNN_CHECK(cudnnConvolutionBackwardData(
                       handle, scale.one(), d.weight.get(), weight, d.output.get(), grad_output, d.conv.get(),
                       static_cast<cudnnConvolutionBwdDataAlgo_t>(algorithm), workspace, bytes, scale.zero(),
                       d.input.get(), grad_input));
                 });
  return true;
}

void cudnn_backward_weight(const Context& ctx, cudnnHandle_t handle, const Conv2dShape& s, DType dtype,
                           const void* grad_output, const void* input, void* grad_weight) {
  if (conv2d_graph_run(ctx, handle, s, dtype, ConvPass::BackwardFilter,
                       {const_cast<void*>(input), grad_weight, const_cast<void*>(grad_output)})) {
    return;
  }
  ConvDescriptors d(s, dtype);
  const Scaling scale(dtype);
  with_algorithm(ctx, handle, d, s, dtype, ConvPass::BackwardFilter, ConvOperands{input, nullptr, grad_output, grad_weight},
                 [&](int algorithm, void* workspace, std::size_t bytes) {
                   SUBLET_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
                       handle, scale.one(), d.input.get(), input, d.output.get(), grad_output, d.conv.get(),
                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(algorithm), workspace, bytes, scale.zero(),
                       d.weight.get(), grad_weight));
                 });
}

void forward(const Context& ctx, const Conv2dShape& s, DType dtype, const void* input, const void* weight,
             const void* bias, void* output) {
  memory::CudaDeviceGuard device(ctx.device);
  cudnnHandle_t handle = cudnn_for(ctx);
  if (!gemm_forward(ctx, s, dtype, input, weight, output)) {
    if (const std::int64_t padded = padded_channels(s, dtype)) {
      const memory::ScopedBlock x = conv2d_widened_copy(ctx, input_rows(s), s.in_channels, padded, input);
      const memory::ScopedBlock w = conv2d_widened_copy(ctx, weight_rows(s), s.in_channels, padded, weight);
      cudnn_forward(ctx, handle, conv2d_with_in_channels(s, padded), dtype, x.get(), w.get(), output);
    } else {
      cudnn_forward(ctx, handle, s, dtype, input, weight, output);
    }
  }
  if (bias == nullptr) return;
  const Scaling scale(dtype);
  if (cudnn_bias(s, dtype)) {
    const BiasDescriptors b(s, dtype);
    SUBLET_CUDNN_CHECK(cudnnAddTensor(handle, scale.one(), b.bias.get(), bias, scale.one(), b.output.get(), output));
  } else {
    conv2d_bias_add(ctx, s, dtype, bias, output);
  }
}

// Accumulating: see cudnn_backward_input. With padded channels the gradient so far is widened
// into the padded buffer, so that cuDNN's sum is the only rounding, as without padding.
bool backward_input(const Context& ctx, const Conv2dShape& s, DType dtype, const void* grad_output, const void* weight,
                    void* grad_input, bool accumulate) {
  memory::CudaDeviceGuard device(ctx.device);
  if (single_tap(s, dtype)) {
    conv2d_single_tap_backward_input(ctx, s, dtype, grad_output, weight, grad_input, accumulate);
    return true;
  }
  cudnnHandle_t handle = cudnn_for(ctx);
  const std::int64_t padded = padded_channels(s, dtype);
  if (padded == 0) return cudnn_backward_input(ctx, handle, s, dtype, grad_output, weight, grad_input, accumulate);
  const memory::ScopedBlock w = conv2d_widened_copy(ctx, weight_rows(s), s.in_channels, padded, weight);
  const memory::ScopedBlock dx =
      accumulate ? conv2d_widened_copy(ctx, input_rows(s), s.in_channels, padded, grad_input)
                 : ctx.workspace(static_cast<std::size_t>(input_rows(s) * padded) * element_size(dtype));
  if (!cudnn_backward_input(ctx, handle, conv2d_with_in_channels(s, padded), dtype, grad_output, w.get(), dx.get(),
                            accumulate)) {
    return false;  // only the widening ran, into workspaces: grad_input is untouched
  }
  conv2d_narrow_channels(ctx, input_rows(s), padded, s.in_channels, dx.get(), grad_input);
  return true;
}

void backward_weight(const Context& ctx, const Conv2dShape& s, DType dtype, const void* grad_output, const void* input,
                     void* grad_weight, void* grad_bias) {
  memory::CudaDeviceGuard device(ctx.device);
  cudnnHandle_t handle = cudnn_for(ctx);
  if (!gemm_backward_weight(ctx, s, dtype, grad_output, input, grad_weight)) {
    if (const std::int64_t padded = padded_channels(s, dtype)) {
      const memory::ScopedBlock x = conv2d_widened_copy(ctx, input_rows(s), s.in_channels, padded, input);
      const memory::ScopedBlock dw =
          ctx.workspace(static_cast<std::size_t>(weight_rows(s) * padded) * element_size(dtype));
      cudnn_backward_weight(ctx, handle, conv2d_with_in_channels(s, padded), dtype, grad_output, x.get(), dw.get());
      conv2d_narrow_channels(ctx, weight_rows(s), padded, s.in_channels, dw.get(), grad_weight);
    } else {
      cudnn_backward_weight(ctx, handle, s, dtype, grad_output, input, grad_weight);
    }
  }
  if (grad_bias == nullptr) return;
  const Scaling scale(dtype);
  if (cudnn_bias(s, dtype)) {
    const BiasDescriptors b(s, dtype);
    SUBLET_CUDNN_CHECK(
        cudnnConvolutionBackwardBias(handle, scale.one(), b.output.get(), grad_output, scale.zero(), b.bias.get(), grad_bias));
  } else {
    conv2d_bias_grad(ctx, s, dtype, grad_output, grad_bias);
  }
}

// Runs one pass; a cuDNN or CUDA failure is rethrown with the pass, dtype, layout and shape in
// front of the library's message (other errors already name conv2d and what they found).
template <typename Run>
void with_context(const char* pass, const Conv2dShape& s, DType dtype, Run&& run) {
  conv_check_dtype(dtype, s.format);
  try {
    run();
  } catch (const CudaError& e) {
    throw CudaError(conv_call_text(pass, s, dtype) + ": " + e.what());
  }
}

}  // namespace

void conv2d_forward(const Context& ctx, const Conv2dShape& shape, DType dtype, const void* input, const void* weight,
                    const void* bias, void* output) {
  with_context("forward", shape, dtype, [&] { forward(ctx, shape, dtype, input, weight, bias, output); });
}

void conv2d_backward_input(const Context& ctx, const Conv2dShape& shape, DType dtype, const void* grad_output,
                           const void* weight, void* grad_input) {
  with_context("backward-input", shape, dtype,
               [&] { backward_input(ctx, shape, dtype, grad_output, weight, grad_input, /*accumulate=*/false); });
}

bool conv2d_backward_input_accumulate(const Context& ctx, const Conv2dShape& shape, DType dtype,
                                      const void* grad_output, const void* weight, void* grad_input) {
  bool done = false;
  with_context("backward-input (accumulating)", shape, dtype,
               [&] { done = backward_input(ctx, shape, dtype, grad_output, weight, grad_input, /*accumulate=*/true); });
  return done;
}

void conv2d_backward_weight(const Context& ctx, const Conv2dShape& shape, DType dtype, const void* grad_output,
                            const void* input, void* grad_weight, void* grad_bias) {
  with_context("backward-weight", shape, dtype,
               [&] { backward_weight(ctx, shape, dtype, grad_output, input, grad_weight, grad_bias); });
}

}  // namespace sublet::ops::cuda
