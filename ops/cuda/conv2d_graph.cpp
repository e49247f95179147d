#include "ops/cuda/conv2d_graph.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <map>
#include <tuple>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "memory/cuda_check.h"
#include "core/errors.h"
#include "core/tuning.h"
#include "ops/conv_settings.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/conv2d_layout.h"
#include "ops/cuda/cudnn_backend.h"

namespace sublet::ops::cuda {
namespace {

// The unique ids the variant pack binds pointers to.
constexpr std::int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y';

// A dense 4-d operand: logical (N, C, H, W) / (K, C, R, S) dims, NCHW or NHWC strides.
BackendDescriptor packed_tensor(std::int64_t uid, DType dtype, MemoryFormat format, std::array<std::int64_t, 4> dims,
                                std::int64_t alignment) {
  const std::array<std::int64_t, 4> strides = conv_strides(dims, format);
  return backend_tensor(uid, conv_data_type(dtype), dims, strides, alignment);
}

}  // namespace

BackendDescriptor convolution_descriptor(const Conv2dShape& s, DType dtype) {
  const cudnnDataType_t compute = conv_compute_type(dtype);  // float32 accumulation for 16-bit
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const std::int64_t spatial_dims = 2;
  const std::array<std::int64_t, 2> dilation{s.dilation_h, s.dilation_w}, stride{s.stride_h, s.stride_w},
      padding{s.pad_h, s.pad_w};
  BackendDescriptor conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute, 1);
  conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode, 1);
  conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &spatial_dims, 1);
  conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, dilation.data(), 2);
  conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, stride.data(), 2);
  conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, padding.data(), 2);
  conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, padding.data(), 2);
  conv.finalize();
  return conv;
}

namespace {

// One operation of the pass, y = conv(x, w) or its gradients; groups follow from the weight's
// channel count (in_channels / groups), as in cuDNN's graph API.
BackendDescriptor conv_operation(const Conv2dShape& s, DType dtype, ConvPass pass, std::int64_t alignment,
                                 bool accumulate) {
  const BackendDescriptor x =
      packed_tensor(kUidX, dtype, s.format, {s.batch, s.in_channels, s.in_height, s.in_width}, alignment);
  const BackendDescriptor w = packed_tensor(kUidW, dtype, s.format,
                                            {s.out_channels, s.in_channels / s.groups, s.kernel_h, s.kernel_w}, alignment);
  const BackendDescriptor y =
      packed_tensor(kUidY, dtype, s.format, {s.batch, s.out_channels, s.out_height(), s.out_width()}, alignment);
  const BackendDescriptor conv = convolution_descriptor(s, dtype);
  struct Names {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  };
  const Names names = [&] {
    switch (pass) {
      case ConvPass::Forward:
        return Names{CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
      case ConvPass::BackwardData:
        return Names{CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
      case ConvPass::BackwardFilter:
        break;
    }
    return Names{CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                 CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                 CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                 CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
  }();
  BackendDescriptor op(names.type);
  op.set_descriptor(names.x, x);
  op.set_descriptor(names.w, w);
  op.set_descriptor(names.y, y);
  op.set_descriptor(names.conv, conv);
  // The pass overwrites its output (alpha 1, beta 0) or adds to it (beta 1), in the compute type
  // (float for 16-bit).
  if (dtype == DType::Float64) {
    const double alpha = 1.0, beta = accumulate ? 1.0 : 0.0;
    op.set(names.alpha, CUDNN_TYPE_DOUBLE, &alpha, 1);
    op.set(names.beta, CUDNN_TYPE_DOUBLE, &beta, 1);
  } else {
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    op.set(names.alpha, CUDNN_TYPE_FLOAT, &alpha, 1);
    op.set(names.beta, CUDNN_TYPE_FLOAT, &beta, 1);
  }
  op.finalize();
  return op;
}

struct ExecutionPlan {
  BackendDescriptor plan{CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR};
  std::int64_t workspace_bytes = 0;
  std::int64_t engine = -1;  // cuDNN's global engine index, for the log
};

// Why the engine's numerical or behaviour notes are not allowed under the current settings
// (nullptr: they are).
const char* rejection(const BackendDescriptor& engine, DType dtype, const ConvAlgorithmSettings& settings) {
  for (const cudnnBackendNumericalNote_t note : engine_numerical_notes(engine)) {
    switch (note) {
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
        return "down-converts inputs";
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
        if (dtype == DType::Float32 && !settings.allow_tf32) return "TF32 not allowed";
        break;
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
        // Sums in the 16-bit storage type: the 16-bit convolutions promise float32 accumulation.
        if (conv_is_half(dtype)) return "reduced-precision reduction";
        break;
      case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
        if (!settings.benchmark) return "non-deterministic";  // heuristics only: two runs give the same bits
        break;
      default:
        break;
    }
  }
  // Engines compiled at run time (NVRTC) stall the first step for seconds; the precompiled ones
  // cover every convolution a ResNet has.
  if (engine_compiles_at_run_time(engine)) return "runtime compilation";
  return nullptr;
}

// Which heuristics propose the engines, in order: cuDNN's mode A (instant), then its fallback list.
constexpr std::array<cudnnBackendHeurMode_t, 2> kHeuristicModes{CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};

// The plans cuDNN can build for the pass, heuristics' order; at most `limit`.
std::vector<ExecutionPlan> candidate_plans(cudnnHandle_t handle, const Conv2dShape& s, DType dtype, ConvPass pass,
                                           std::int64_t alignment, bool accumulate, std::size_t limit) {
  const ConvAlgorithmSettings settings = conv_algorithm_settings();
  BackendDescriptor op = conv_operation(s, dtype, pass, alignment, accumulate);
  auto [graph, graph_status] = operation_graph(handle, {&op});
  if (graph_status != CUDNN_STATUS_SUCCESS) return {};

  std::vector<ExecutionPlan> plans;
  for (cudnnBackendHeurMode_t mode : kHeuristicModes) {
    for (BackendDescriptor& config : engine_configs(graph, mode)) {
      if (plans.size() >= limit) return plans;
      const BackendDescriptor engine = engine_of(config.get());
      if (const char* why = rejection(engine, dtype, settings)) {
        if (tuning().log_conv_plans) {
          std::fprintf(stderr, "conv2d: engine %lld refused: %s\n", static_cast<long long>(engine_index(engine)), why);
        }
        continue;
      }
      std::int64_t workspace_bytes = 0;
      auto [plan, plan_status] = execution_plan(handle, config, &workspace_bytes);
      if (plan_status != CUDNN_STATUS_SUCCESS) continue;  // this engine can't run the shape
      plans.push_back(ExecutionPlan{std::move(plan), workspace_bytes, engine_index(engine)});
    }
  }
  return plans;
}

// Binds the operands and the workspace, then enqueues the plan on the handle's stream.
cudnnStatus_t execute(cudnnHandle_t handle, const ExecutionPlan& plan, const ConvGraphOperands& io, void* workspace) {
  return execute_plan(handle, plan.plan, {kUidX, kUidW, kUidY}, {io.x, io.w, io.y}, workspace);
}

// Milliseconds of the fastest of three runs (after one untimed), or +infinity when the plan
// fails or its workspace cannot be allocated.
float time_plan(const Context& ctx, cudnnHandle_t handle, const ExecutionPlan& plan, const ConvGraphOperands& io) {
  constexpr float kFailed = std::numeric_limits<float>::infinity();
  memory::ScopedBlock workspace;
  if (plan.workspace_bytes > 0) {
    try {
      workspace = ctx.workspace(static_cast<std::size_t>(plan.workspace_bytes));
    } catch (const OutOfMemoryError&) {
      return kFailed;
    }
  }
  if (execute(handle, plan, io, workspace.get()) != CUDNN_STATUS_SUCCESS) return kFailed;
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  cudaEvent_t start = nullptr, stop = nullptr;
  SUBLET_CUDA_CHECK(cudaEventCreate(&start));
  SUBLET_CUDA_CHECK(cudaEventCreate(&stop));
  float best = kFailed;
  for (int run = 0; run < 3; ++run) {
    SUBLET_CUDA_CHECK(cudaEventRecord(start, stream));
    const cudnnStatus_t status = execute(handle, plan, io, workspace.get());
    SUBLET_CUDA_CHECK(cudaEventRecord(stop, stream));
    SUBLET_CUDA_CHECK(cudaEventSynchronize(stop));
    if (status != CUDNN_STATUS_SUCCESS) break;
    float ms = 0;
    SUBLET_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    best = std::min(best, ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

// Plans for one shape, in the order to try them.
using RankedPlans = std::vector<ExecutionPlan>;

// tuning().log_conv_plans (a diagnostic): which engines a new shape considered, and (benchmarking) their times.
void log_plans(const Conv2dShape& s, DType dtype, ConvPass pass, const RankedPlans& plans,
               const std::vector<std::pair<float, std::size_t>>& timed) {
  static const char* const kPassNames[] = {"forward", "backward-data", "backward-filter"};
  std::string line = fmt::format("conv2d {} {} {} N{} C{} {}x{} -> K{} k{}x{} s{} p{} g{}:",
                                 kPassNames[static_cast<int>(pass)], dtype_name(dtype), memory_format_name(s.format),
                                 s.batch, s.in_channels, s.in_height, s.in_width, s.out_channels, s.kernel_h,
                                 s.kernel_w, s.stride_h, s.pad_h, s.groups);
  if (plans.empty()) line += " no engine (legacy API)";
  if (timed.empty()) {
    for (const ExecutionPlan& p : plans) line += fmt::format(" engine {} ({} B)", p.engine, p.workspace_bytes);
  } else {
    for (const auto& [ms, index] : timed)
      line += fmt::format(" engine {} {:.3f} ms ({} B);", plans[index].engine, ms, plans[index].workspace_bytes);
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

RankedPlans rank_plans(const Context& ctx, cudnnHandle_t handle, const Conv2dShape& s, DType dtype, ConvPass pass,
                       std::int64_t alignment, bool accumulate, ConvGraphOperands io) {
  const ConvAlgorithmSettings settings = conv_algorithm_settings();
  const std::size_t limit = !settings.benchmark             ? 4  // the first that builds, and fallbacks for OOM
                            : settings.benchmark_limit <= 0 ? std::numeric_limits<std::size_t>::max()
                                                            : static_cast<std::size_t>(settings.benchmark_limit);
  RankedPlans plans = candidate_plans(handle, s, dtype, pass, alignment, accumulate, limit);
  const bool log = tuning().log_conv_plans;
  if (!settings.benchmark || plans.size() < 2) {
    if (log) log_plans(s, dtype, pass, plans, {});
    return plans;
  }
  // An accumulating pass timed on its real output would add to it at every run: time it on a
  // scratch output of the same size and alignment instead (the values do not matter).
  memory::ScopedBlock scratch;
  if (accumulate) {
    const std::int64_t written = pass == ConvPass::Forward          ? s.output_numel()
                                 : pass == ConvPass::BackwardData ? s.input_numel()
                                                                  : s.weight_numel();
    scratch = ctx.workspace(static_cast<std::size_t>(written) * element_size(dtype));
    (pass == ConvPass::Forward ? io.y : pass == ConvPass::BackwardData ? io.x : io.w) = scratch.get();
  }
  std::vector<std::pair<float, std::size_t>> timed;
  for (std::size_t i = 0; i < plans.size(); ++i) timed.emplace_back(time_plan(ctx, handle, plans[i], io), i);
  scratch = memory::ScopedBlock();
  std::stable_sort(timed.begin(), timed.end());
  if (log) log_plans(s, dtype, pass, plans, timed);
  RankedPlans ranked;
  for (const auto& [ms, index] : timed) {
    if (ms != std::numeric_limits<float>::infinity()) ranked.push_back(std::move(plans[index]));
  }
  // Timing took workspaces far larger than a step needs: hand their segments back now, as
  // PyTorch does after benchmarking, so they do not stay in the reserved memory for good.
  ctx.allocator->empty_cache();
  return ranked;
}

// The largest power of two up to 16 bytes that divides every operand's address.
std::int64_t common_alignment(const ConvGraphOperands& io, DType dtype) {
  const auto bits = reinterpret_cast<std::uintptr_t>(io.x) | reinterpret_cast<std::uintptr_t>(io.w) |
                    reinterpret_cast<std::uintptr_t>(io.y) | std::uintptr_t{16};
  return std::max<std::int64_t>(static_cast<std::int64_t>(bits & (~bits + 1)),
                                static_cast<std::int64_t>(element_size(dtype)));
}

// The choice key plus the operands' common alignment (plans are built for it) and whether the
// pass accumulates (beta 1).
using PlanKey = std::tuple<ConvChoiceKey, std::int64_t, bool>;

}  // namespace

ConvChoiceKey conv_choice_key(const Context& ctx, const Conv2dShape& s, DType dtype, ConvPass pass) {
  const ConvAlgorithmSettings settings = conv_algorithm_settings();
  return {ctx.device.index, static_cast<std::int64_t>(dtype), static_cast<std::int64_t>(pass), s.batch,
          s.in_channels, s.in_height, s.in_width, s.out_channels, s.kernel_h, s.kernel_w, s.stride_h, s.stride_w,
          s.pad_h, s.pad_w, s.dilation_h, s.dilation_w, s.groups,
          (settings.benchmark ? 1 : 0) + (settings.allow_tf32 ? 2 : 0), settings.benchmark_limit,
          static_cast<std::int64_t>(s.format)};
}

bool conv2d_graph_run(const Context& ctx, cudnnHandle_t handle, const Conv2dShape& s, DType dtype, ConvPass pass,
                      const ConvGraphOperands& io, bool accumulate) {
  // Per thread: the plans belong to this thread's handle. shared_ptr keeps an entry alive while
  // it runs even if the map grows.
  thread_local std::map<PlanKey, std::shared_ptr<const RankedPlans>> cache;
  const std::int64_t alignment = common_alignment(io, dtype);
  const PlanKey key{conv_choice_key(ctx, s, dtype, pass), alignment, accumulate};
  auto found = cache.find(key);
  if (found == cache.end()) {
    auto ranked =
        std::make_shared<const RankedPlans>(rank_plans(ctx, handle, s, dtype, pass, alignment, accumulate, io));
    found = cache.emplace(key, std::move(ranked)).first;
  }
  const RankedPlans& plans = *found->second;
  if (plans.empty()) return false;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    memory::ScopedBlock workspace;
    if (plans[i].workspace_bytes > 0) {
      try {
        workspace = ctx.workspace(static_cast<std::size_t>(plans[i].workspace_bytes));
      } catch (const OutOfMemoryError&) {
        if (i + 1 == plans.size()) throw;  // no plan with a smaller workspace left: report the OOM
        continue;
      }
    }
    SUBLET_CUDNN_CHECK(execute(handle, plans[i], io, workspace.get()));
    return true;
  }
  return false;
}

}  // namespace sublet::ops::cuda
