#include "ops/cuda/attention_cudnn.h"

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "memory/cuda_device_guard.h"
#include "ops/cuda/attention_cudnn_graph.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/cudnn_backend.h"
#include "ops/cuda/handles.h"
#include "ops/cuda/stream.h"

namespace sublet::ops::cuda::detail {
namespace {

struct SdpaPlan {
  BackendDescriptor plan;
  std::int64_t workspace_bytes = 0;
};

// The first plan that builds, from cuDNN's heuristics (mode A, then its fallback list), as
// cudnn_frontend picks for the SDPA graphs; null when the graph or every engine refuses.
std::shared_ptr<const SdpaPlan> build_plan(cudnnHandle_t handle, const SdpaGraphKey& key) {
  const SdpaOperations operations = build_sdpa_operations(key);
  std::vector<const BackendDescriptor*> ops;
  for (const BackendDescriptor& op : operations.ops) ops.push_back(&op);
  auto [graph, status] = operation_graph(handle, ops);
  if (status != CUDNN_STATUS_SUCCESS) return nullptr;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    for (const BackendDescriptor& config : engine_configs(graph, mode)) {
      std::int64_t workspace_bytes = 0;
      auto [plan, plan_status] = execution_plan(handle, config, &workspace_bytes);
      if (plan_status != CUDNN_STATUS_SUCCESS) continue;  // this engine can't run the shape
      return std::make_shared<const SdpaPlan>(SdpaPlan{std::move(plan), workspace_bytes});
    }
  }
  return nullptr;
}

// Per thread: a plan belongs to the thread's handle. shared_ptr keeps an entry alive while it
// runs even if the map grows.
std::shared_ptr<const SdpaPlan> plan_for(const Context& ctx, cudnnHandle_t handle, const SdpaGraphKey& key) {
  thread_local std::map<std::array<std::int64_t, 33>, std::shared_ptr<const SdpaPlan>> cache;
  const auto cache_key = key.as_array(ctx.device.index);
  auto found = cache.find(cache_key);
  if (found == cache.end()) found = cache.emplace(cache_key, build_plan(handle, key)).first;
  return found->second;
}

SdpaGraphKey graph_key(SdpaPass pass, const AttentionShape& shape, DType dtype) {
  SdpaGraphKey key;
  key.pass = pass;
  key.dtype = dtype;
  key.batch = shape.batch;
  key.heads = shape.heads;
  key.query_len = shape.query_len;
  key.key_len = shape.key_len;
  key.head_dim = shape.head_dim;
  key.causal = shape.causal;
  return key;
}

// The pointers (device memory, or host scalars for the by-value tensors) of one run.
struct Bindings {
  std::vector<std::int64_t> uids;
  std::vector<void*> pointers;
  void bind(std::int64_t uid, const void* pointer) {
    uids.push_back(uid);
    pointers.push_back(const_cast<void*>(pointer));
  }
};

constexpr std::int64_t kWorkspaceAlignment = 256;

// Builds or finds the plan, then enqueues it with the bindings, the scalars and the workspace.
bool run(const Context& ctx, const SdpaGraphKey& key, const AttentionShape& shape, Bindings bindings) {
  memory::CudaDeviceGuard device(ctx.device);
  cudnnHandle_t handle = cudnn_for(ctx);
  const std::shared_ptr<const SdpaPlan> plan = plan_for(ctx, handle, key);
  if (!plan) return false;

  // The host scalars are read when the plan is enqueued (a CUDA graph keeps their values).
  const float scale = static_cast<float>(shape.scale), mask_value = sdpa_mask_value(), one = 1.0f;
  bindings.bind(kSdpaScale, &scale);
  if (key.causal) bindings.bind(kSdpaMaskValue, &mask_value);

  const std::int64_t plan_bytes = (plan->workspace_bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment *
                                  kWorkspaceAlignment;
  const std::int64_t accumulator_bytes =
      key.pass == SdpaPass::Backward ? sdpa_grad_query_accumulator_bytes(key) : 0;
  memory::ScopedBlock workspace;
  if (plan_bytes + accumulator_bytes > 0) workspace = ctx.workspace(static_cast<std::size_t>(plan_bytes + accumulator_bytes));
  if (key.pass == SdpaPass::Backward) {
    void* accumulator = static_cast<char*>(workspace.get()) + plan_bytes;
    SUBLET_CUDA_CHECK(cudaMemsetAsync(accumulator, 0, static_cast<std::size_t>(accumulator_bytes), stream_of(ctx.stream)));
    bindings.bind(kSdpaOne, &one);
    bindings.bind(kSdpaGradQAccumulator, accumulator);
  }
  SUBLET_CUDNN_CHECK(execute_plan(handle, plan->plan, bindings.uids, bindings.pointers, workspace.get()));
  return true;
}

bool sixteen_bit(DType dtype) { return dtype == DType::BFloat16 || dtype == DType::Float16; }

}  // namespace

const char* cudnn_attention_refusal(const Context& ctx, const AttentionShape& shape, DType dtype) {
  if (!sixteen_bit(dtype)) return "cuDNN's fused attention takes bfloat16 and float16 only";
  if (shape.head_dim % 8 != 0 || shape.head_dim > 128) {
    return "cuDNN's fused attention takes head dims that are multiples of 8 up to 128";
  }
  thread_local std::map<int, int> major_by_device;
  auto found = major_by_device.find(ctx.device.index);
  if (found == major_by_device.end()) {
    int major = 0;
    SUBLET_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx.device.index));
    found = major_by_device.emplace(ctx.device.index, major).first;
  }
  if (found->second < 8) return "cuDNN's fused attention needs an sm_80 or newer GPU";
  return nullptr;
}

bool cudnn_attention_forward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                             ConstAttentionRef key, ConstAttentionRef value, AttentionRef out, float* lse) {
  SdpaGraphKey graph = graph_key(SdpaPass::Forward, shape, dtype);
  graph.q = query.strides;
  graph.k = key.strides;
  graph.v = value.strides;
  graph.o = out.strides;
  Bindings bindings;
  bindings.bind(kSdpaQ, query.data);
  bindings.bind(kSdpaK, key.data);
  bindings.bind(kSdpaV, value.data);
  bindings.bind(kSdpaO, out.data);
  bindings.bind(kSdpaStats, lse);
  return run(ctx, graph, shape, std::move(bindings));
}

bool cudnn_attention_backward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                              ConstAttentionRef key, ConstAttentionRef value, ConstAttentionRef out,
                              ConstAttentionRef grad_out, const float* lse, AttentionRef grad_query,
                              AttentionRef grad_key, AttentionRef grad_value) {
  SdpaGraphKey graph = graph_key(SdpaPass::Backward, shape, dtype);
  graph.q = query.strides;
  graph.k = key.strides;
  graph.v = value.strides;
  graph.o = out.strides;
  graph.grad_out = grad_out.strides;
  graph.grad_q = grad_query.strides;
  graph.grad_k = grad_key.strides;
  graph.grad_v = grad_value.strides;
  Bindings bindings;
  bindings.bind(kSdpaQ, query.data);
  bindings.bind(kSdpaK, key.data);
  bindings.bind(kSdpaV, value.data);
  bindings.bind(kSdpaO, out.data);
  bindings.bind(kSdpaStats, lse);
  bindings.bind(kSdpaGradOut, grad_out.data);
  bindings.bind(kSdpaGradQ, grad_query.data);
  bindings.bind(kSdpaGradK, grad_key.data);
  bindings.bind(kSdpaGradV, grad_value.data);
  return run(ctx, graph, shape, std::move(bindings));
}

}  // namespace sublet::ops::cuda::detail
