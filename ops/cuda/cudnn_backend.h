#pragma once
// The pieces of cuDNN's backend (graph) API that every graph sublet builds shares: an owning
// descriptor, tensors (real or virtual), pointwise operations, an operation graph, the engine
// configurations the heuristics propose and what an engine says about itself. The convolution
// (ops/cuda/conv2d_graph.cpp) and the fused convolution + batch norm graphs
// (ops/cuda/conv_bn_graph.cpp) are built from them.
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ops/cuda/cuda_checks.h"

namespace sublet::ops::cuda {

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

// A finalized 4-d tensor descriptor with explicit strides. A virtual tensor lives only inside a
// fused kernel (no pointer is bound to it).
BackendDescriptor backend_tensor(std::int64_t uid, cudnnDataType_t type, const std::array<std::int64_t, 4>& dims,
                                 const std::array<std::int64_t, 4>& strides, std::int64_t alignment,
                                 bool is_virtual = false);

// A finalized pointwise operation computing in float: y = op(x) or y = op(x, b) (b may be null),
// with the optional alpha2 scaling b (x - b as ADD with alpha2 = -1).
BackendDescriptor pointwise_operation(cudnnPointwiseMode_t mode, const BackendDescriptor& x,
                                      const BackendDescriptor* b, const BackendDescriptor& y, float alpha2 = 1.0f);

// A finalized RELU_BWD pointwise operation: dx = dy where x > 0, else 0.
BackendDescriptor relu_backward_operation(const BackendDescriptor& dy, const BackendDescriptor& x,
                                          const BackendDescriptor& dx);

// The operation graph of `ops` for the handle; the status of its finalize (cuDNN refuses a graph
// it has no pattern for at this step).
std::pair<BackendDescriptor, cudnnStatus_t> operation_graph(cudnnHandle_t handle,
                                                            const std::vector<const BackendDescriptor*>& ops);

// The engine configurations a heuristics mode proposes for the graph, best first (none when the
// heuristics descriptor does not finalize).
std::vector<BackendDescriptor> engine_configs(const BackendDescriptor& graph, cudnnBackendHeurMode_t mode);

// The engine an engine configuration runs, and cuDNN's global index of it (for logs).
BackendDescriptor engine_of(cudnnBackendDescriptor_t config);
std::int64_t engine_index(const BackendDescriptor& engine);

// What an engine declares about itself.
std::vector<cudnnBackendNumericalNote_t> engine_numerical_notes(const BackendDescriptor& engine);
std::vector<cudnnBackendBehaviorNote_t> engine_behaviour_notes(const BackendDescriptor& engine);
bool engine_compiles_at_run_time(const BackendDescriptor& engine);

// An execution plan for one engine configuration on the handle; the status of its finalize
// (an engine may refuse a shape only here). On success, *workspace_bytes holds its workspace.
std::pair<BackendDescriptor, cudnnStatus_t> execution_plan(cudnnHandle_t handle, const BackendDescriptor& config,
                                                           std::int64_t* workspace_bytes);

// Binds pointers to unique ids plus the workspace and enqueues the plan on the handle's stream.
cudnnStatus_t execute_plan(cudnnHandle_t handle, const BackendDescriptor& plan, const std::vector<std::int64_t>& uids,
                           const std::vector<void*>& pointers, void* workspace);

// cuDNN's name for a status ("CUDNN_STATUS_NOT_SUPPORTED").
std::string cudnn_status_text(cudnnStatus_t status);

}  // namespace sublet::ops::cuda
