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

// The handle attributes of the operation graph and the execution plan are marked deprecated in
// cuDNN 9.x headers (a device-property descriptor is the newer way) but remain the documented
// way to build a plan for a handle, and cudnn_frontend still sets them.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace sublet::ops::cuda {
namespace {

// Owns one backend descriptor.
class BackendDescriptor {
 public:
  explicit BackendDescriptor(cudnnBackendDescriptorType_t type) {
    SUBLET_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &desc_));
  }
  ~BackendDescriptor() {
    if (desc_ != nullptr) cudnnBackendDestroyDescriptor(desc_);
  }
  BackendDescriptor(BackendDescriptor&& other) noexcept : desc_(std::exchange(other.desc_, nullptr)) {}
  BackendDescriptor& operator=(BackendDescriptor&& other) noexcept {
    std::swap(desc_, other.desc_);
    return *this;
  }
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return desc_; }

  template <typename V>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const V* values, std::int64_t count) {
    SUBLET_CUDNN_CHECK(cudnnBackendSetAttribute(desc_, name, type, count, values));
  }
  void set_descriptor(cudnnBackendAttributeName_t name, const BackendDescriptor& value) {
    cudnnBackendDescriptor_t raw = value.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &raw, 1);
  }
  void finalize() { SUBLET_CUDNN_CHECK(cudnnBackendFinalize(desc_)); }
  // For descriptors cuDNN may refuse for this shape or engine: the status, no exception.
  cudnnStatus_t try_finalize() { return cudnnBackendFinalize(desc_); }

 private:
  cudnnBackendDescriptor_t desc_ = nullptr;
};

// The unique ids the variant pack binds pointers to.
constexpr std::int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y';

// A dense 4-d operand: logical (N, C, H, W) / (K, C, R, S) dims, NCHW or NHWC strides.
BackendDescriptor packed_tensor(std::int64_t uid, DType dtype, MemoryFormat format, std::array<std::int64_t, 4> dims,
                                std::int64_t alignment) {
  const std::array<std::int64_t, 4> strides = conv_strides(dims, format);
  const cudnnDataType_t type = conv_data_type(dtype);
  BackendDescriptor tensor(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  tensor.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type, 1);
  tensor.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4);
  tensor.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4);
  tensor.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid, 1);
  tensor.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment, 1);
  tensor.finalize();
  return tensor;
}

BackendDescriptor convolution(const Conv2dShape& s, DType dtype) {
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
  const BackendDescriptor conv = convolution(s, dtype);
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

// The engine an engine configuration runs.
BackendDescriptor engine_of(cudnnBackendDescriptor_t config) {
  BackendDescriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw_engine = engine.get();
  std::int64_t count = 0;
  SUBLET_CUDNN_CHECK(
      cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &raw_engine));
  return engine;
}

std::int64_t engine_index(const BackendDescriptor& engine) {
  std::int64_t index = -1, count = 0;
  SUBLET_CUDNN_CHECK(
      cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count, &index));
  return index;
}

// Why the engine's numerical or behaviour notes are not allowed under the current settings
// (nullptr: they are).
const char* rejection(const BackendDescriptor& engine, DType dtype, const ConvAlgorithmSettings& settings) {
  cudnnBackendDescriptor_t raw_engine = engine.get();
  std::int64_t count = 0;
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  SUBLET_CUDNN_CHECK(cudnnBackendGetAttribute(raw_engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                              static_cast<std::int64_t>(notes.size()), &count, notes.data()));
  for (std::int64_t i = 0; i < count; ++i) {
    switch (notes[static_cast<std::size_t>(i)]) {
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
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> behaviour{};
  SUBLET_CUDNN_CHECK(cudnnBackendGetAttribute(raw_engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                              static_cast<std::int64_t>(behaviour.size()), &count, behaviour.data()));
  // Engines compiled at run time (NVRTC) stall the first step for seconds; the precompiled ones
  // cover every convolution a ResNet has.
  for (std::int64_t i = 0; i < count; ++i) {
    if (behaviour[static_cast<std::size_t>(i)] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) return "runtime compilation";
  }
  return nullptr;
}

// The engine configurations a heuristics mode proposes for the graph, best first.
std::vector<BackendDescriptor> engine_configs(const BackendDescriptor& graph, cudnnBackendHeurMode_t mode) {
  BackendDescriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heuristics.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode, 1);
  if (heuristics.try_finalize() != CUDNN_STATUS_SUCCESS) return {};
  std::int64_t available = 0;
  SUBLET_CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &available, nullptr));
  std::vector<BackendDescriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < available; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  std::int64_t returned = 0;
  SUBLET_CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, available, &returned, raw.data()));
  configs.erase(configs.begin() + std::min(returned, available), configs.end());
  return configs;
}

// Which heuristics propose the engines, in order: cuDNN's mode A (instant), then its fallback list.
constexpr std::array<cudnnBackendHeurMode_t, 2> kHeuristicModes{CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};

// The plans cuDNN can build for the pass, heuristics' order; at most `limit`.
std::vector<ExecutionPlan> candidate_plans(cudnnHandle_t handle, const Conv2dShape& s, DType dtype, ConvPass pass,
                                           std::int64_t alignment, bool accumulate, std::size_t limit) {
  const ConvAlgorithmSettings settings = conv_algorithm_settings();
  BackendDescriptor op = conv_operation(s, dtype, pass, alignment, accumulate);
  BackendDescriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle, 1);
  cudnnBackendDescriptor_t raw_op = op.get();
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, &raw_op, 1);
  if (graph.try_finalize() != CUDNN_STATUS_SUCCESS) return {};

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
      ExecutionPlan candidate;
      candidate.engine = engine_index(engine);
      candidate.plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle, 1);
      candidate.plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
      if (candidate.plan.try_finalize() != CUDNN_STATUS_SUCCESS) continue;  // this engine can't run the shape
      SUBLET_CUDNN_CHECK(cudnnBackendGetAttribute(candidate.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                  CUDNN_TYPE_INT64, 1, nullptr, &candidate.workspace_bytes));
      plans.push_back(std::move(candidate));
    }
  }
  return plans;
}

// Binds the operands and the workspace, then enqueues the plan on the handle's stream.
cudnnStatus_t execute(cudnnHandle_t handle, const ExecutionPlan& plan, const ConvGraphOperands& io, void* workspace) {
  BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  const std::array<std::int64_t, 3> uids{kUidX, kUidW, kUidY};
  std::array<void*, 3> pointers{io.x, io.w, io.y};
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), 3);
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers.data(), 3);
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace, 1);
  pack.finalize();
  return cudnnBackendExecute(handle, plan.plan.get(), pack.get());
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
