#pragma once
// The operation graphs of cuDNN's fused flash attention (the backend API's SDPA patterns, as
// cudnn_frontend lowers its SDPA forward and backward nodes for cuDNN 9 before 9.21):
//
// forward:  S = matmul(Q, K^T) * scale; causal: S = select(row >= col, S, -inf)
//           M = max_row(S), E = exp(S - M), Z = sum_row(E)
//           stats = M + log(Z) (float32, [B, H, T, 1]); P = E / Z (16-bit); O = matmul(P, V)
// backward: D = sum_row(dO * O); S as forward; P = exp(S - stats)
//           dV = matmul(P^T, dO); dS = P * (matmul(dO, V^T) - D) * scale
//           dK = matmul(dS^T, Q); dQ = identity(matmul(dS, K) into a zeroed float32 accumulator)
//
// cuDNN matches these op lists to its fused engines; the names and data types of the virtual
// tensors between the ops follow the frontend's, since the pattern matcher expects them. The
// op descriptors need no handle or device, so a CPU test can build (finalize) them.
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <deque>
#include <vector>

#include "core/dtype.h"
#include "ops/attention.h"
#include "ops/cuda/cudnn_backend.h"

namespace sublet::ops::cuda {

enum class SdpaPass : int { Forward, Backward };

// Everything a graph (and so a plan) depends on. Strides are element strides of [B, H, T, D]
// views with a unit stride over D; the backward's dO, dQ, dK and dV follow q, k, v, o.
struct SdpaGraphKey {
  SdpaPass pass = SdpaPass::Forward;
  DType dtype = DType::BFloat16;
  std::int64_t batch = 0, heads = 0, query_len = 0, key_len = 0, head_dim = 0;
  bool causal = false;
  AttentionStrides q, k, v, o, grad_out, grad_q, grad_k, grad_v;

  // The fields as one ordered tuple, for a map key.
  std::array<std::int64_t, 33> as_array(int device) const;
};

// Unique ids the variant pack binds pointers (or, for the by-value scalars, host values) to.
enum SdpaUid : std::int64_t {
  kSdpaQ = 1,
  kSdpaK,
  kSdpaV,
  kSdpaO,
  kSdpaStats,
  kSdpaGradOut,
  kSdpaGradQ,
  kSdpaGradK,
  kSdpaGradV,
  kSdpaScale,          // float by value: the softmax scale
  kSdpaMaskValue,      // float by value: what the causal mask writes over hidden scores
  kSdpaOne,            // float by value: 1, the backward's dropout-free mask factor
  kSdpaGradQAccumulator,  // float32 [B, H, Tq, D], dense: in the workspace, zeroed before each run
};

// The ops of one pass, in the order the graph lists them, with every tensor they reference
// kept alive beside them.
struct SdpaOperations {
  std::deque<BackendDescriptor> tensors;
  std::vector<BackendDescriptor> ops;
};

// Builds (finalizes) the op descriptors of the pass; throws CudaError naming the cuDNN status
// when cuDNN refuses one (a bug in this file, not a shape without an engine: that shows only
// when the operation graph or a plan is finalized).
SdpaOperations build_sdpa_operations(const SdpaGraphKey& key);

// Bytes of the backward's float32 dQ accumulator.
std::int64_t sdpa_grad_query_accumulator_bytes(const SdpaGraphKey& key);

// The value the causal mask writes: -inf from cuDNN 9.10 on, the lowest float before (what the
// frontend passes to each version).
float sdpa_mask_value();

}  // namespace sublet::ops::cuda
