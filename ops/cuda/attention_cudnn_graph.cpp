#include "ops/cuda/attention_cudnn_graph.h"

#include <deque>
#include <limits>
#include <map>
#include <string>

#include "core/errors.h"

namespace sublet::ops::cuda {

std::array<std::int64_t, 33> SdpaGraphKey::as_array(int device) const {
  return {device, static_cast<std::int64_t>(pass), static_cast<std::int64_t>(dtype), batch, heads, query_len,
          key_len, head_dim, causal ? 1 : 0,
          q.batch, q.head, q.token, k.batch, k.head, k.token, v.batch, v.head, v.token, o.batch, o.head, o.token,
          grad_out.batch, grad_out.head, grad_out.token, grad_q.batch, grad_q.head, grad_q.token,
          grad_k.batch, grad_k.head, grad_k.token, grad_v.batch, grad_v.head, grad_v.token};
}

std::int64_t sdpa_grad_query_accumulator_bytes(const SdpaGraphKey& key) {
  return key.batch * key.heads * key.query_len * key.head_dim * static_cast<std::int64_t>(sizeof(float));
}

float sdpa_mask_value() {
  return cudnnGetVersion() < 91000 ? std::numeric_limits<float>::lowest() : -std::numeric_limits<float>::infinity();
}

namespace {

using Dims = std::array<std::int64_t, 4>;

// Virtual tensors get ids from here on (the bound ones use SdpaUid).
constexpr std::int64_t kFirstVirtualUid = 1000;
// cudnn_frontend declares every tensor 16-byte aligned; the caller checks the operands are.
constexpr std::int64_t kAlignment = 16;

Dims dense_strides(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

Dims operand_strides(const AttentionStrides& s) { return {s.batch, s.head, s.token, 1}; }

// [B, H, D, T] view of a [B, H, T, D] operand: K^T and V^T without a copy.
Dims transposed_strides(const AttentionStrides& s) { return {s.batch, s.head, 1, s.token}; }

cudnnDataType_t io_type(DType dtype) {
  switch (dtype) {
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    case DType::Float16: return CUDNN_DATA_HALF;
    default: break;
  }
  throw DTypeError(std::string("cuDNN attention: expected bfloat16 or float16, got ") + dtype_name(dtype));
}

// Collects the tensors and ops of one graph. Tensors live in a deque so that references to them
// stay valid while more are added.
class GraphBuilder {
 public:
  // A tensor the variant pack binds to memory.
  const BackendDescriptor& bound(std::int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides,
                                 cudnnBackendTensorReordering_t reordering = CUDNN_TENSOR_REORDERING_NONE) {
    return add_tensor(uid, type, dims, strides, /*is_virtual=*/false, /*by_value=*/false, reordering);
  }
  // A float scalar the variant pack binds to a host value; one descriptor per id.
  const BackendDescriptor& scalar(std::int64_t uid) {
    auto found = scalars_.find(uid);
    if (found != scalars_.end()) return *found->second;
    const Dims one{1, 1, 1, 1};
    const BackendDescriptor& t = add_tensor(uid, CUDNN_DATA_FLOAT, one, one, false, /*by_value=*/true,
                                            CUDNN_TENSOR_REORDERING_NONE);
    scalars_.emplace(uid, &t);
    return t;
  }
  // A tensor that lives only inside the fused kernel.
  const BackendDescriptor& temp(cudnnDataType_t type, const Dims& dims, const Dims& strides) {
    return add_tensor(next_virtual_uid_++, type, dims, strides, /*is_virtual=*/true, false,
                      CUDNN_TENSOR_REORDERING_NONE);
  }
  const BackendDescriptor& temp(cudnnDataType_t type, const Dims& dims) { return temp(type, dims, dense_strides(dims)); }

  // c = a b over the last two dims, batched over the first two; float accumulation.
  void matmul(const BackendDescriptor& a, const BackendDescriptor& b, const BackendDescriptor& c) {
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    BackendDescriptor desc(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    desc.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute, 1);
    desc.finalize();
    BackendDescriptor op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
    op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
    op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
    op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_DESC, desc);
    op.finalize();
    ops_.push_back(std::move(op));
  }

  // y = mode(x[, b][, t]) computed in `compute`; `axis` for GEN_INDEX (-1: none).
  void pointwise(cudnnPointwiseMode_t mode, const BackendDescriptor& x, const BackendDescriptor* b,
                 const BackendDescriptor* t, const BackendDescriptor& y, cudnnDataType_t compute = CUDNN_DATA_FLOAT,
                 std::int64_t axis = -1) {
    BackendDescriptor desc(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    desc.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode, 1);
    desc.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &compute, 1);
    if (axis >= 0) desc.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis, 1);
    desc.finalize();
    BackendDescriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, desc);
    op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b != nullptr) op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t != nullptr) op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    op.finalize();
    ops_.push_back(std::move(op));
  }
  void unary(cudnnPointwiseMode_t mode, const BackendDescriptor& x, const BackendDescriptor& y) {
    pointwise(mode, x, nullptr, nullptr, y);
  }
  void binary(cudnnPointwiseMode_t mode, const BackendDescriptor& x, const BackendDescriptor& b,
              const BackendDescriptor& y) {
    pointwise(mode, x, &b, nullptr, y);
  }

  // y = the max or sum of x over the dims where y has size 1, in float.
  void reduction(cudnnReduceTensorOp_t reduce, const BackendDescriptor& x, const BackendDescriptor& y) {
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    BackendDescriptor desc(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    desc.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &reduce, 1);
    desc.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &compute, 1);
    desc.finalize();
    BackendDescriptor op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
    op.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    op.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_DESC, desc);
    op.finalize();
    ops_.push_back(std::move(op));
  }

  // y: the same elements as x under y's dims and strides (here: a transpose of the last two).
  void reshape(const BackendDescriptor& x, const BackendDescriptor& y) {
    BackendDescriptor op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    op.set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
    op.set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    op.finalize();
    ops_.push_back(std::move(op));
  }

  SdpaOperations take() { return {std::move(tensors_), std::move(ops_)}; }

 private:
  const BackendDescriptor& add_tensor(std::int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides,
                                      bool is_virtual, bool by_value, cudnnBackendTensorReordering_t reordering) {
    BackendDescriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type, 1);
    t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4);
    t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4);
    t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid, 1);
    t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &kAlignment, 1);
    const bool yes = true;
    if (is_virtual) t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &yes, 1);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &yes, 1);
    if (reordering != CUDNN_TENSOR_REORDERING_NONE) {
      t.set(CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TYPE_TENSOR_REORDERING_MODE, &reordering, 1);
    }
    t.finalize();
    tensors_.push_back(std::move(t));
    return tensors_.back();
  }

  std::deque<BackendDescriptor> tensors_;
  std::vector<BackendDescriptor> ops_;
  std::map<std::int64_t, const BackendDescriptor*> scalars_;
  std::int64_t next_virtual_uid_ = kFirstVirtualUid;
};

// The scaled scores S = (Q K^T) * scale, with the causal mask applied when the key asks for it.
const BackendDescriptor& masked_scores(GraphBuilder& g, const SdpaGraphKey& key, const BackendDescriptor& q,
                                       const BackendDescriptor& k_transposed) {
  const Dims scores{key.batch, key.heads, key.query_len, key.key_len};
  const BackendDescriptor& products = g.temp(CUDNN_DATA_FLOAT, scores);
  g.matmul(q, k_transposed, products);
  const BackendDescriptor& scaled = g.temp(CUDNN_DATA_FLOAT, scores);
  g.binary(CUDNN_POINTWISE_MUL, products, g.scalar(kSdpaScale), scaled);
  if (!key.causal) return scaled;
  // Row (query) index >= column (key) index keeps the score: the upper-left aligned mask.
  const BackendDescriptor& row = g.temp(CUDNN_DATA_INT32, scores);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, nullptr, nullptr, row, CUDNN_DATA_INT32, /*axis=*/2);
  const BackendDescriptor& column = g.temp(CUDNN_DATA_INT32, scores);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, nullptr, nullptr, column, CUDNN_DATA_INT32, /*axis=*/3);
  const BackendDescriptor& keep = g.temp(CUDNN_DATA_BOOLEAN, scores);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, &column, nullptr, keep, CUDNN_DATA_BOOLEAN);
  const BackendDescriptor& masked = g.temp(CUDNN_DATA_FLOAT, scores);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, scaled, &g.scalar(kSdpaMaskValue), &keep, masked);
  return masked;
}

void build_forward(GraphBuilder& g, const SdpaGraphKey& key) {
  const cudnnDataType_t io = io_type(key.dtype);
  const std::int64_t b = key.batch, h = key.heads, sq = key.query_len, skv = key.key_len, d = key.head_dim;
  const Dims rows{b, h, sq, 1}, row_strides{h * sq, sq, 1, 1};
  const Dims scores{b, h, sq, skv};
  const BackendDescriptor& q = g.bound(kSdpaQ, io, {b, h, sq, d}, operand_strides(key.q));
  const BackendDescriptor& k_transposed = g.bound(kSdpaK, io, {b, h, d, skv}, transposed_strides(key.k));
  const BackendDescriptor& v = g.bound(kSdpaV, io, {b, h, skv, d}, operand_strides(key.v));
  const BackendDescriptor& o = g.bound(kSdpaO, io, {b, h, sq, d}, operand_strides(key.o));
  const BackendDescriptor& stats = g.bound(kSdpaStats, CUDNN_DATA_FLOAT, rows, row_strides);

  const BackendDescriptor& s = masked_scores(g, key, q, k_transposed);
  // The softmax with its statistics, as the frontend's composite softmax node.
  const BackendDescriptor& row_max = g.temp(CUDNN_DATA_FLOAT, rows, row_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, s, row_max);
  const BackendDescriptor& shifted = g.temp(CUDNN_DATA_FLOAT, scores);
  g.binary(CUDNN_POINTWISE_SUB, s, row_max, shifted);
  const BackendDescriptor& exps = g.temp(CUDNN_DATA_FLOAT, scores);
  g.unary(CUDNN_POINTWISE_EXP, shifted, exps);
  const BackendDescriptor& row_sum = g.temp(CUDNN_DATA_FLOAT, rows, row_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, exps, row_sum);
  const BackendDescriptor& log_sum = g.temp(CUDNN_DATA_FLOAT, rows, row_strides);
  g.unary(CUDNN_POINTWISE_LOG, row_sum, log_sum);
  g.binary(CUDNN_POINTWISE_ADD, row_max, log_sum, stats);
  // P in the operands' type: the second matmul's A operand must be.
  const BackendDescriptor& probabilities = g.temp(io, scores);
  g.binary(CUDNN_POINTWISE_DIV, exps, row_sum, probabilities);
  g.matmul(probabilities, v, o);
}

void build_backward(GraphBuilder& g, const SdpaGraphKey& key) {
  const cudnnDataType_t io = io_type(key.dtype);
  const std::int64_t b = key.batch, h = key.heads, sq = key.query_len, skv = key.key_len, d = key.head_dim;
  const Dims rows{b, h, sq, 1}, row_strides{h * sq, sq, 1, 1};
  const Dims scores{b, h, sq, skv};
  const Dims scores_transposed{b, h, skv, sq}, scores_transposed_strides{h * sq * skv, sq * skv, 1, skv};
  const BackendDescriptor& q = g.bound(kSdpaQ, io, {b, h, sq, d}, operand_strides(key.q));
  const BackendDescriptor& k_transposed = g.bound(kSdpaK, io, {b, h, d, skv}, transposed_strides(key.k));
  const BackendDescriptor& v_transposed = g.bound(kSdpaV, io, {b, h, d, skv}, transposed_strides(key.v));
  const BackendDescriptor& o = g.bound(kSdpaO, io, {b, h, sq, d}, operand_strides(key.o));
  const BackendDescriptor& stats = g.bound(kSdpaStats, CUDNN_DATA_FLOAT, rows, row_strides);
  const BackendDescriptor& grad_out = g.bound(kSdpaGradOut, io, {b, h, sq, d}, operand_strides(key.grad_out));
  const BackendDescriptor& grad_q = g.bound(kSdpaGradQ, io, {b, h, sq, d}, operand_strides(key.grad_q));
  const BackendDescriptor& grad_k = g.bound(kSdpaGradK, io, {b, h, skv, d}, operand_strides(key.grad_k));
  const BackendDescriptor& grad_v = g.bound(kSdpaGradV, io, {b, h, skv, d}, operand_strides(key.grad_v));
  // A non-virtual float32 dQ accumulator is how the backend API selects the flash backward that
  // adds dQ up across key blocks (instead of a B*H*Tq*Tk dP workspace).
  const BackendDescriptor& grad_q_accumulator = g.bound(kSdpaGradQAccumulator, CUDNN_DATA_FLOAT, {b, h, sq, d},
                                                        dense_strides({b, h, sq, d}), CUDNN_TENSOR_REORDERING_F16x16);
  const BackendDescriptor& one = g.scalar(kSdpaOne);
  const BackendDescriptor& scale = g.scalar(kSdpaScale);

  // D = rowsum(dO * O): the softmax backward's per-row term.
  const BackendDescriptor& grad_out_times_out = g.temp(CUDNN_DATA_FLOAT, {b, h, sq, d});
  g.binary(CUDNN_POINTWISE_MUL, grad_out, o, grad_out_times_out);
  const BackendDescriptor& row_dot = g.temp(CUDNN_DATA_FLOAT, rows, row_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, grad_out_times_out, row_dot);
  const BackendDescriptor& softmax_sum = g.temp(CUDNN_DATA_FLOAT, rows, row_strides);
  g.binary(CUDNN_POINTWISE_MUL, row_dot, one, softmax_sum);

  // P = exp(S - stats), rebuilt from the forward's statistics; dV = P^T dO.
  const BackendDescriptor& s = masked_scores(g, key, q, k_transposed);
  const BackendDescriptor& shifted = g.temp(CUDNN_DATA_FLOAT, scores);
  g.binary(CUDNN_POINTWISE_SUB, s, stats, shifted);
  const BackendDescriptor& probabilities = g.temp(CUDNN_DATA_FLOAT, scores);
  g.unary(CUDNN_POINTWISE_EXP, shifted, probabilities);
  const BackendDescriptor& probabilities_t = g.temp(io, scores_transposed, scores_transposed_strides);
  g.reshape(probabilities, probabilities_t);
  g.matmul(probabilities_t, grad_out, grad_v);

  // dS = P * (dO V^T - D) * scale; dK = dS^T Q.
  const BackendDescriptor& grad_p = g.temp(CUDNN_DATA_FLOAT, scores);
  g.matmul(grad_out, v_transposed, grad_p);
  const BackendDescriptor& grad_p_kept = g.temp(CUDNN_DATA_FLOAT, scores);
  g.binary(CUDNN_POINTWISE_MUL, grad_p, one, grad_p_kept);
  const BackendDescriptor& centred = g.temp(CUDNN_DATA_FLOAT, scores);
  g.binary(CUDNN_POINTWISE_SUB, grad_p_kept, softmax_sum, centred);
  const BackendDescriptor& grad_s_unscaled = g.temp(CUDNN_DATA_FLOAT, scores);
  g.binary(CUDNN_POINTWISE_MUL, centred, probabilities, grad_s_unscaled);
  const BackendDescriptor& grad_s = g.temp(CUDNN_DATA_FLOAT, scores);
  g.binary(CUDNN_POINTWISE_MUL, grad_s_unscaled, scale, grad_s);
  const BackendDescriptor& grad_s_t = g.temp(io, scores_transposed, scores_transposed_strides);
  g.reshape(grad_s, grad_s_t);
  g.matmul(grad_s_t, q, grad_k);

  // dQ = dS K, through the float32 accumulator.
  const BackendDescriptor& k = g.temp(CUDNN_DATA_FLOAT, {b, h, skv, d}, operand_strides(key.k));
  g.reshape(k_transposed, k);
  g.matmul(grad_s, k, grad_q_accumulator);
  g.unary(CUDNN_POINTWISE_IDENTITY, grad_q_accumulator, grad_q);
}

}  // namespace

SdpaOperations build_sdpa_operations(const SdpaGraphKey& key) {
  GraphBuilder g;
  if (key.pass == SdpaPass::Forward) {
    build_forward(g, key);
  } else {
    build_backward(g, key);
  }
  return g.take();
}

}  // namespace sublet::ops::cuda
