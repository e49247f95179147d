// The CUDA entry of conv2d_scale_bias_relu_genstats: cuDNN's fused plan (ops/cuda/conv_bn_graph.h)
// where an engine takes the shape and dtype, else the composition of the prologue kernel, the
// convolution and the per-channel sums. Plans are cached per thread (each thread has its own cuDNN
// handle, ops/cuda/handles.h), keyed like the convolution's plans plus the pattern and the
// operands' alignment; a shape without an engine is remembered as such.
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "core/errors.h"
#include "core/tuning.h"
#include "memory/cuda_device_guard.h"
#include "ops/conv2d.h"
#include "ops/cuda/conv2d_graph.h"
#include "ops/cuda/conv2d_layout.h"
#include "ops/cuda/conv_bn_fusion_cuda.h"
#include "ops/cuda/conv_bn_graph.h"
#include "ops/cuda/cudnn_backend.h"
#include "ops/cuda/handles.h"

namespace sublet::ops::cuda {

namespace {

struct FusedPlan {
  BackendDescriptor plan{CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR};
  std::int64_t workspace_bytes = 0;
  std::int64_t engine = -1;
  std::vector<std::int64_t> uids;  // the bound tensors, in the graph's order
};

ConvBnPattern pattern_for(bool prologue, bool stats) {
  if (prologue && stats) return ConvBnPattern::ScaleBiasReluForwardGenStats;
  if (prologue) return ConvBnPattern::ScaleBiasReluForward;
  return ConvBnPattern::ForwardGenStats;
}

// Why an engine may not run the pass (nullptr: it may). Engines compiled at run time are allowed:
// the fused patterns have few precompiled engines, and a plan is built once per shape.
const char* refusal(const BackendDescriptor& engine, DType dtype) {
  for (const cudnnBackendNumericalNote_t note : engine_numerical_notes(engine)) {
    if (note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) return "down-converts inputs";
    if (note == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION && conv_is_half(dtype)) {
      return "reduced-precision reduction";
    }
    if (note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE && dtype == DType::Float32) return "TF32";
  }
  return nullptr;
}

// The first plan cuDNN finalizes for the pattern (heuristics mode A, then the fallback list), or
// nullptr with `why` saying what was missing.
std::shared_ptr<const FusedPlan> build_plan(cudnnHandle_t handle, ConvBnPattern pattern, const Conv2dShape& s,
                                            DType dtype, std::int64_t alignment, std::string& why) {
  ConvBnGraphOptions options;
  options.float_scale_bias = true;
  options.alignment = alignment;
  ConvBnGraph graph;
  try {
    graph = build_conv_bn_graph(handle, pattern, s, dtype, options);
  } catch (const CudaError& e) {
    why = std::string("a descriptor was refused: ") + e.what();
    return nullptr;
  }
  if (graph.status != CUDNN_STATUS_SUCCESS) {
    why = "graph refused: " + cudnn_status_text(graph.status);
    return nullptr;
  }
  why = "no engine";
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    for (const BackendDescriptor& config : engine_configs(graph.graph, mode)) {
      const BackendDescriptor engine = engine_of(config.get());
      if (const char* refused = refusal(engine, dtype)) {
        why = std::string("engines refused (") + refused + ")";
        continue;
      }
      auto plan = std::make_shared<FusedPlan>();
      auto [built, status] = execution_plan(handle, config, &plan->workspace_bytes);
      if (status != CUDNN_STATUS_SUCCESS) {
        why = "no plan finalized: " + cudnn_status_text(status);
        continue;
      }
      plan->plan = std::move(built);
      plan->engine = engine_index(engine);
      for (const ConvBnBoundTensor& t : graph.bound) plan->uids.push_back(t.uid);
      return plan;
    }
  }
  return nullptr;
}

// The largest power of two up to 16 bytes dividing every address.
std::int64_t common_alignment(std::initializer_list<const void*> pointers) {
  std::uintptr_t bits = 16;
  for (const void* p : pointers) bits |= reinterpret_cast<std::uintptr_t>(p);
  return static_cast<std::int64_t>(bits & (~bits + 1));
}

std::shared_ptr<const FusedPlan> plan_for(const Context& ctx, cudnnHandle_t handle, const Conv2dShape& s, DType dtype,
                                          ConvBnPattern pattern, std::int64_t alignment) {
  using Key = std::tuple<ConvChoiceKey, int, std::int64_t>;
  thread_local std::map<Key, std::shared_ptr<const FusedPlan>> cache;
  const Key key{conv_choice_key(ctx, s, dtype, ConvPass::Forward), static_cast<int>(pattern), alignment};
  auto found = cache.find(key);
  if (found == cache.end()) {
    std::string why;
    auto plan = build_plan(handle, pattern, s, dtype, alignment, why);
    if (tuning().log_conv_plans) {
      std::fprintf(stderr, "%s\n",
                   fmt::format("conv2d+bn {} {}: {}", conv_bn_pattern_name(pattern), conv_call_text("forward", s, dtype),
                               plan ? fmt::format("fused, engine {} ({} B)", plan->engine, plan->workspace_bytes)
                                    : "unfused (" + why + ")")
                       .c_str());
    }
    found = cache.emplace(key, std::move(plan)).first;
  }
  return found->second;
}

BatchNormShape activation_shape(std::int64_t batch, std::int64_t channels, std::int64_t height, std::int64_t width,
                                MemoryFormat format) {
  BatchNormShape b;
  b.batch = batch;
  b.channels = channels;
  b.height = height;
  b.width = width;
  b.format = format;
  return b;
}

}  // namespace

bool conv2d_scale_bias_relu_genstats_fused(const Context& ctx, const Conv2dShape& s, DType dtype, bool prologue,
                                           bool stats) {
  if ((!prologue && !stats) || dtype == DType::Float64) return false;  // cuDNN's fused engines take 16-bit and float32
  memory::CudaDeviceGuard device(ctx.device);
  return plan_for(ctx, cudnn_for(ctx), s, dtype, pattern_for(prologue, stats), 16) != nullptr;
}

bool conv2d_scale_bias_relu_genstats(const Context& ctx, const Conv2dShape& s, DType dtype, const void* input,
                                     const float* scale, const float* bias, const void* weight, void* output,
                                     float* sum, float* sqsum, bool allow_fused) {
  memory::CudaDeviceGuard device(ctx.device);
  const bool prologue = scale != nullptr, stats = sum != nullptr;
  if (allow_fused && (prologue || stats) && dtype != DType::Float64) {
    cudnnHandle_t handle = cudnn_for(ctx);
    const std::int64_t alignment = common_alignment({input, weight, output, scale, bias, sum, sqsum});
    if (const auto plan = plan_for(ctx, handle, s, dtype, pattern_for(prologue, stats), alignment)) {
      memory::ScopedBlock workspace;
      if (plan->workspace_bytes > 0) workspace = ctx.workspace(static_cast<std::size_t>(plan->workspace_bytes));
      std::vector<void*> pointers;
      for (const std::int64_t uid : plan->uids) {
        switch (uid) {
          case kConvBnX: pointers.push_back(const_cast<void*>(input)); break;
          case kConvBnW: pointers.push_back(const_cast<void*>(weight)); break;
          case kConvBnY: pointers.push_back(output); break;
          case kConvBnScale: pointers.push_back(const_cast<float*>(scale)); break;
          case kConvBnBias: pointers.push_back(const_cast<float*>(bias)); break;
          case kConvBnSum: pointers.push_back(sum); break;
          case kConvBnSqSum: pointers.push_back(sqsum); break;
          default: throw ValueError("conv2d_scale_bias_relu_genstats: unexpected tensor in the fused graph");
        }
      }
      SUBLET_CUDNN_CHECK(execute_plan(handle, plan->plan, plan->uids, pointers, workspace.get()));
      return true;
    }
  }
  const void* conv_input = input;
  memory::ScopedBlock activated;
  if (prologue) {
    activated = ctx.workspace(static_cast<std::size_t>(s.input_numel()) * element_size(dtype));
    cuda::scale_bias_relu(ctx, activation_shape(s.batch, s.in_channels, s.in_height, s.in_width, s.format), dtype, input,
                    scale, bias, activated.get());
    conv_input = activated.get();
  }
  ops::conv2d_forward(ctx, s, dtype, conv_input, weight, nullptr, output);
  if (stats) {
    channel_sums(ctx, activation_shape(s.batch, s.out_channels, s.out_height(), s.out_width(), s.format), dtype,
                 output, sum, sqsum);
  }
  return false;
}

}  // namespace sublet::ops::cuda
