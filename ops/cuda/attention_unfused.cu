// Attention with the scores materialised, for float32 and float64: per batch element, cuBLAS
// strided-batched GEMMs over the heads (so any batch stride works, and q, k, v may be views of a
// fused projection), the [H, Tq, Tk] scores in one workspace, and one block per score row for
// the masked softmax and its backward. Row-major products go through cuBLAS's column-major API
// by the transpose trick (ops/cuda/matmul_cuda.cpp explains it).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <type_traits>

#include "core/errors.h"
#include "memory/cuda_device_guard.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/handles.h"
#include "ops/cuda/stream.h"

namespace sublet::ops::cuda::detail {

namespace {

constexpr int kRowThreads = 256;

int to_int(std::int64_t value, const char* what) {
  if (value < 0 || value > INT_MAX) {
    throw ShapeError(std::string("scaled_dot_product_attention: ") + what + " " + std::to_string(value) +
                     " does not fit cuBLAS's 32-bit int");
  }
  return static_cast<int>(value);
}

// A row-major operand of `rows` x `cols` with row stride `ld` (a one-row operand may have any
// stride; cuBLAS still wants ld >= cols).
struct RowMajor {
  const void* data;
  std::int64_t ld;
  std::int64_t batch_stride;
};
RowMajor operand(const void* data, std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t batch_stride) {
  return {data, rows == 1 ? std::max(ld, cols) : ld, batch_stride};
}

// Row-major C[m, n] = alpha * op(A) op(B) + beta * C over `batch` matrices, op = transpose when
// asked: cuBLAS computes the column-major C^T = op(B)^T op(A)^T.
template <typename T>
void gemm(cublasHandle_t handle, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          RowMajor a, RowMajor b, T beta, T* c, std::int64_t ldc, std::int64_t c_batch_stride, std::int64_t batch) {
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int mi = to_int(m, "length"), ni = to_int(n, "length"), ki = to_int(k, "length");
  const int lda = to_int(a.ld, "row stride"), ldb = to_int(b.ld, "row stride"), ldci = to_int(ldc, "row stride");
  const int count = to_int(batch, "head count");
  if constexpr (std::is_same_v<T, float>) {
    SUBLET_CUBLAS_CHECK(cublasSgemmStridedBatched(handle, op_b, op_a, ni, mi, ki, &alpha,
                                                  static_cast<const float*>(b.data), ldb, b.batch_stride,
                                                  static_cast<const float*>(a.data), lda, a.batch_stride, &beta, c,
                                                  ldci, c_batch_stride, count));
  } else {
    SUBLET_CUBLAS_CHECK(cublasDgemmStridedBatched(handle, op_b, op_a, ni, mi, ki, &alpha,
                                                  static_cast<const double*>(b.data), ldb, b.batch_stride,
                                                  static_cast<const double*>(a.data), lda, a.batch_stride, &beta, c,
                                                  ldci, c_batch_stride, count));
  }
}

template <typename T>
__device__ T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>) return expf(x); else return exp(x);
}
template <typename T>
__device__ T log_of(T x) {
  if constexpr (std::is_same_v<T, float>) return logf(x); else return log(x);
}

// One block per row of `scores` [rows = H * Tq, key_len]: the masked softmax in place and the
// row's log-sum-exp.
template <typename T>
__global__ void masked_softmax_kernel(T* scores, std::int64_t query_len, std::int64_t key_len, bool causal, T* lse) {
  __shared__ T scratch[kRowThreads];
  const std::int64_t r = blockIdx.x;
  const std::int64_t t = r % query_len;
  T* row = scores + r * key_len;
  T max_value = -INFINITY;
  for (std::int64_t s = threadIdx.x; s < key_len; s += blockDim.x) {
    if (!attention_masked(t, s, causal)) max_value = max(max_value, row[s]);
  }
  max_value = block_combine(max_value, scratch, [](T a, T b) { return max(a, b); });
  T sum = 0;
  for (std::int64_t s = threadIdx.x; s < key_len; s += blockDim.x) {
    if (!attention_masked(t, s, causal)) sum += exp_of(row[s] - max_value);
  }
  sum = block_combine(sum, scratch, [](T a, T b) { return a + b; });
  for (std::int64_t s = threadIdx.x; s < key_len; s += blockDim.x) {
    row[s] = attention_masked(t, s, causal) ? T(0) : exp_of(row[s] - max_value) / sum;
  }
  if (threadIdx.x == 0) lse[r] = max_value + log_of(sum);
}

// scores -> probabilities again from the forward's log-sum-exp (one block per row).
template <typename T>
__global__ void probabilities_from_lse_kernel(T* scores, std::int64_t query_len, std::int64_t key_len, bool causal,
                                              const T* lse) {
  const std::int64_t r = blockIdx.x;
  const std::int64_t t = r % query_len;
  T* row = scores + r * key_len;
  const T row_lse = lse[r];
  for (std::int64_t s = threadIdx.x; s < key_len; s += blockDim.x) {
    row[s] = attention_masked(t, s, causal) ? T(0) : exp_of(row[s] - row_lse);
  }
}

// dS = P * (dP - rowsum(P * dP)), in place over dP (one block per row; masked P is 0).
template <typename T>
__global__ void softmax_backward_kernel(const T* probs, T* grad_probs, std::int64_t key_len) {
  __shared__ T scratch[kRowThreads];
  const std::int64_t r = blockIdx.x;
  const T* p = probs + r * key_len;
  T* dp = grad_probs + r * key_len;
  T dot = 0;
  for (std::int64_t s = threadIdx.x; s < key_len; s += blockDim.x) dot += p[s] * dp[s];
  dot = block_combine(dot, scratch, [](T a, T b) { return a + b; });
  for (std::int64_t s = threadIdx.x; s < key_len; s += blockDim.x) dp[s] = p[s] * (dp[s] - dot);
}

template <typename T>
const T* at(ConstAttentionRef ref, std::int64_t b) {
  return static_cast<const T*>(ref.data) + b * ref.strides.batch;
}
template <typename T>
T* at(AttentionRef ref, std::int64_t b) {
  return static_cast<T*>(ref.data) + b * ref.strides.batch;
}

unsigned row_blocks(const AttentionShape& s) {
  const std::int64_t rows = s.heads * s.query_len;
  if (rows > INT_MAX) throw ShapeError("scaled_dot_product_attention: heads * query length " + std::to_string(rows) + " is too large");
  return static_cast<unsigned>(rows);
}

template <typename T>
void forward_typed(const Context& ctx, const AttentionShape& s, ConstAttentionRef q, ConstAttentionRef k,
                   ConstAttentionRef v, AttentionRef out, T* lse) {
  const std::int64_t L = s.query_len, S = s.key_len, D = s.head_dim, H = s.heads;
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  memory::ScopedBlock scores_block = ctx.workspace(static_cast<std::size_t>(H * L * S) * sizeof(T));
  T* scores = static_cast<T*>(scores_block.get());
  CublasLease cublas = cublas_for(ctx);
  for (std::int64_t b = 0; b < s.batch; ++b) {
    gemm<T>(cublas.handle, false, true, L, S, D, static_cast<T>(s.scale),
            operand(at<T>(q, b), L, D, q.strides.token, q.strides.head),
            operand(at<T>(k, b), S, D, k.strides.token, k.strides.head), T(0), scores, S, L * S, H);
    masked_softmax_kernel<T><<<row_blocks(s), kRowThreads, 0, stream>>>(scores, L, S, s.causal, lse + b * H * L);
    SUBLET_CUDA_LAUNCH_CHECK(masked_softmax_kernel);
    gemm<T>(cublas.handle, false, false, L, D, S, T(1), operand(scores, L, S, S, L * S),
            operand(at<T>(v, b), S, D, v.strides.token, v.strides.head), T(0), at<T>(out, b),
            operand(nullptr, L, D, out.strides.token, 0).ld, out.strides.head, H);
  }
}

template <typename T>
void backward_typed(const Context& ctx, const AttentionShape& s, ConstAttentionRef q, ConstAttentionRef k,
                    ConstAttentionRef v, ConstAttentionRef grad_out, const T* lse, AttentionRef grad_q,
                    AttentionRef grad_k, AttentionRef grad_v) {
  const std::int64_t L = s.query_len, S = s.key_len, D = s.head_dim, H = s.heads;
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  const std::size_t matrix_bytes = static_cast<std::size_t>(H * L * S) * sizeof(T);
  memory::ScopedBlock probs_block = ctx.workspace(matrix_bytes);
  memory::ScopedBlock grad_block = ctx.workspace(matrix_bytes);
  T* probs = static_cast<T*>(probs_block.get());
  T* grad_scores = static_cast<T*>(grad_block.get());
  const T scale = static_cast<T>(s.scale);
  CublasLease cublas = cublas_for(ctx);
  const auto out_ld = [&](AttentionRef r, std::int64_t rows) { return operand(nullptr, rows, D, r.strides.token, 0).ld; };
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const RowMajor qb = operand(at<T>(q, b), L, D, q.strides.token, q.strides.head);
    const RowMajor kb = operand(at<T>(k, b), S, D, k.strides.token, k.strides.head);
    const RowMajor vb = operand(at<T>(v, b), S, D, v.strides.token, v.strides.head);
    const RowMajor gob = operand(at<T>(grad_out, b), L, D, grad_out.strides.token, grad_out.strides.head);
    const RowMajor pb = operand(probs, L, S, S, L * S), dsb = operand(grad_scores, L, S, S, L * S);
    gemm<T>(cublas.handle, false, true, L, S, D, scale, qb, kb, T(0), probs, S, L * S, H);
    probabilities_from_lse_kernel<T><<<row_blocks(s), kRowThreads, 0, stream>>>(probs, L, S, s.causal, lse + b * H * L);
    SUBLET_CUDA_LAUNCH_CHECK(probabilities_from_lse_kernel);
    // dV = P^T dO; dP = dO V^T; dS = P * (dP - rowsum(P dP)); dQ = scale dS K; dK = scale dS^T Q.
    gemm<T>(cublas.handle, true, false, S, D, L, T(1), pb, gob, T(0), at<T>(grad_v, b), out_ld(grad_v, S),
            grad_v.strides.head, H);
    gemm<T>(cublas.handle, false, true, L, S, D, T(1), gob, vb, T(0), grad_scores, S, L * S, H);
    softmax_backward_kernel<T><<<row_blocks(s), kRowThreads, 0, stream>>>(probs, grad_scores, S);
    SUBLET_CUDA_LAUNCH_CHECK(softmax_backward_kernel);
    gemm<T>(cublas.handle, false, false, L, D, S, scale, dsb, kb, T(0), at<T>(grad_q, b), out_ld(grad_q, L),
            grad_q.strides.head, H);
    gemm<T>(cublas.handle, true, false, S, D, L, scale, dsb, qb, T(0), at<T>(grad_k, b), out_ld(grad_k, S),
            grad_k.strides.head, H);
  }
}

}  // namespace

void unfused_attention_forward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                               ConstAttentionRef key, ConstAttentionRef value, AttentionRef out, void* lse) {
  cpu::dispatch_floating(dtype, "scaled_dot_product_attention", [&](auto tag) {
    using T = decltype(tag);
    forward_typed<T>(ctx, shape, query, key, value, out, static_cast<T*>(lse));
  });
}

void unfused_attention_backward(const Context& ctx, const AttentionShape& shape, DType dtype,
                                ConstAttentionRef query, ConstAttentionRef key, ConstAttentionRef value,
                                ConstAttentionRef grad_out, const void* lse, AttentionRef grad_query,
                                AttentionRef grad_key, AttentionRef grad_value) {
  cpu::dispatch_floating(dtype, "scaled_dot_product_attention backward", [&](auto tag) {
    using T = decltype(tag);
    backward_typed<T>(ctx, shape, query, key, value, grad_out, static_cast<const T*>(lse), grad_query, grad_key,
                      grad_value);
  });
}

}  // namespace sublet::ops::cuda::detail
