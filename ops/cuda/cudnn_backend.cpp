#include "ops/cuda/cudnn_backend.h"

#include <algorithm>

// The handle attributes of the operation graph and the execution plan are marked deprecated in
// cuDNN 9.x headers (a device-property descriptor is the newer way) but remain the documented
// way to build a plan for a handle, and cudnn_frontend still sets them.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace sublet::ops::cuda {

BackendDescriptor backend_tensor(std::int64_t uid, cudnnDataType_t type, const std::array<std::int64_t, 4>& dims,
                                 const std::array<std::int64_t, 4>& strides, std::int64_t alignment,
                                 bool is_virtual) {
  BackendDescriptor tensor(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  tensor.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type, 1);
  tensor.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4);
  tensor.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4);
  tensor.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid, 1);
  tensor.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment, 1);
  if (is_virtual) {
    const bool yes = true;
    tensor.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &yes, 1);
  }
  tensor.finalize();
  return tensor;
}

namespace {

BackendDescriptor pointwise_descriptor(cudnnPointwiseMode_t mode) {
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  BackendDescriptor pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode, 1);
  pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &math, 1);
  pw.finalize();
  return pw;
}

}  // namespace

BackendDescriptor pointwise_operation(cudnnPointwiseMode_t mode, const BackendDescriptor& x,
                                      const BackendDescriptor* b, const BackendDescriptor& y, float alpha2) {
  const BackendDescriptor pw = pointwise_descriptor(mode);
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
  if (b != nullptr) op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  if (alpha2 != 1.0f) op.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, &alpha2, 1);
  op.finalize();
  return op;
}

BackendDescriptor relu_backward_operation(const BackendDescriptor& dy, const BackendDescriptor& x,
                                          const BackendDescriptor& dx) {
  const BackendDescriptor pw = pointwise_descriptor(CUDNN_POINTWISE_RELU_BWD);
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, dy);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, dx);
  op.finalize();
  return op;
}

std::pair<BackendDescriptor, cudnnStatus_t> operation_graph(cudnnHandle_t handle,
                                                            const std::vector<const BackendDescriptor*>& ops) {
  BackendDescriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle, 1);
  std::vector<cudnnBackendDescriptor_t> raw;
  raw.reserve(ops.size());
  for (const BackendDescriptor* op : ops) raw.push_back(op->get());
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw.data(),
            static_cast<std::int64_t>(raw.size()));
  const cudnnStatus_t status = graph.try_finalize();
  return {std::move(graph), status};
}

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

std::vector<cudnnBackendNumericalNote_t> engine_numerical_notes(const BackendDescriptor& engine) {
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  std::int64_t count = 0;
  SUBLET_CUDNN_CHECK(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                              static_cast<std::int64_t>(notes.size()), &count, notes.data()));
  count = std::clamp<std::int64_t>(count, 0, static_cast<std::int64_t>(notes.size()));
  return {notes.begin(), notes.begin() + count};
}

std::vector<cudnnBackendBehaviorNote_t> engine_behaviour_notes(const BackendDescriptor& engine) {
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> notes{};
  std::int64_t count = 0;
  SUBLET_CUDNN_CHECK(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                              static_cast<std::int64_t>(notes.size()), &count, notes.data()));
  count = std::clamp<std::int64_t>(count, 0, static_cast<std::int64_t>(notes.size()));
  return {notes.begin(), notes.begin() + count};
}

bool engine_compiles_at_run_time(const BackendDescriptor& engine) {
  const auto notes = engine_behaviour_notes(engine);
  return std::find(notes.begin(), notes.end(), CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) != notes.end();
}

std::pair<BackendDescriptor, cudnnStatus_t> execution_plan(cudnnHandle_t handle, const BackendDescriptor& config,
                                                           std::int64_t* workspace_bytes) {
  BackendDescriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle, 1);
  plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
  const cudnnStatus_t status = plan.try_finalize();
  if (status == CUDNN_STATUS_SUCCESS && workspace_bytes != nullptr) {
    SUBLET_CUDNN_CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                                1, nullptr, workspace_bytes));
  }
  return {std::move(plan), status};
}

cudnnStatus_t execute_plan(cudnnHandle_t handle, const BackendDescriptor& plan, const std::vector<std::int64_t>& uids,
                           const std::vector<void*>& pointers, void* workspace) {
  BackendDescriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  const auto count = static_cast<std::int64_t>(uids.size());
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), count);
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers.data(), count);
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace, 1);
  pack.finalize();
  return cudnnBackendExecute(handle, plan.get(), pack.get());
}

std::string cudnn_status_text(cudnnStatus_t status) { return cudnnGetErrorString(status); }

}  // namespace sublet::ops::cuda
