// The fused attention backward (FlashAttention-2's algorithm) for bfloat16 and float16.
//  1. delta[row] = sum_d dO[row, d] * O[row, d] (float32), and the float32 dQ accumulator zeroed.
//  2. One block per (batch * head, 64 keys): K and V of its keys stay in shared memory, dK and dV
//     in float32 registers (16 keys per warp); the query rows stream past in tiles of 64. For
//     each tile the warps rebuild P^T = exp(scale K Q^T - lse) from the saved log-sum-exp, then
//     dV += P^T dO, dP^T = V dO^T, dS^T = P^T * (dP^T - delta), dK += dS^T Q, and, through
//     shared memory (dS transposed to rows of queries), dQ += dS K, added into the float32
//     accumulator with atomics since every key block contributes to every query row.
//  3. dQ = scale * accumulator, rounded to 16 bits.
// Nothing of size T x T is ever stored: the workspaces are delta and the dQ accumulator.
#include <cuda_runtime.h>

#include <string>

#include "core/errors.h"
#include "memory/caching_allocator.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/attention_flash_common.cuh"
#include "ops/cuda/attention_flash_launch.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/stream.h"

namespace sublet::ops::cuda::detail {

namespace {

using namespace flash;

// delta[bh * L + row] = dO[row] . O[row]: one warp per row.
template <typename T>
__global__ void row_dot_kernel(FlashParams p, float* delta) {
  const std::int64_t rows = p.batch * p.heads * p.query_len;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = threadIdx.x % 32;
  for (std::int64_t r = global_thread_index() / 32; r < rows; r += warps) {
    const std::int64_t bh = r / p.query_len, row = r % p.query_len, b = bh / p.heads, h = bh % p.heads;
    const T* o = static_cast<const T*>(p.o.data) + b * p.o.strides.batch + h * p.o.strides.head + row * p.o.strides.token;
    const T* d_o = static_cast<const T*>(p.grad_out.data) + b * p.grad_out.strides.batch +
                   h * p.grad_out.strides.head + row * p.grad_out.strides.token;
    float sum = 0.f;
    for (std::int64_t d = lane; d < p.head_dim; d += 32) sum += to_float(o[d]) * to_float(d_o[d]);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) delta[r] = sum;
  }
}

// dQ = scale * accumulator into the strided 16-bit gradient.
template <typename T>
__global__ void write_grad_query_kernel(FlashParams p, const float* accumulator) {
  const std::int64_t total = p.batch * p.heads * p.query_len * p.head_dim;
  for (std::int64_t i = global_thread_index(); i < total; i += grid_threads()) {
    const std::int64_t d = i % p.head_dim, row = (i / p.head_dim) % p.query_len;
    const std::int64_t bh = i / (p.head_dim * p.query_len), b = bh / p.heads, h = bh % p.heads;
    T* dq = static_cast<T*>(p.grad_q.data) + b * p.grad_q.strides.batch + h * p.grad_q.strides.head +
            row * p.grad_q.strides.token;
    dq[d] = from_float<T>(accumulator[i] * p.scale);
  }
}

template <int D>
constexpr std::size_t backward_shared_bytes() {
  constexpr std::size_t rows = kBlockM * (D + kPad), cols = D * (kBlockM + kPad);
  // K, V, Q, dO as rows; K, Q, dO transposed; dS [64 queries][64 keys + pad]; lse and delta.
  return 2 * (4 * rows + 3 * cols + kBlockM * (kBlockN + kPad)) + 2 * kBlockM * sizeof(float);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) flash_backward_kernel(FlashParams p, const float* lse,
                                                                  const float* delta, float* dq_accumulator) {
  static_assert(kBlockM == kBlockN, "the causal start below assumes square tiles");
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  constexpr int ld = D + kPad, ldt = kBlockM + kPad;
  T* k_tile = reinterpret_cast<T*>(shared_bytes);
  T* v_tile = k_tile + kBlockN * ld;
  T* q_tile = v_tile + kBlockN * ld;
  T* do_tile = q_tile + kBlockM * ld;
  T* k_transposed = do_tile + kBlockM * ld;
  T* q_transposed = k_transposed + D * ldt;
  T* do_transposed = q_transposed + D * ldt;
  T* ds_tile = do_transposed + D * ldt;  // [query][key]
  float* lse_tile = reinterpret_cast<float*>(ds_tile + kBlockM * ldt);
  float* delta_tile = lse_tile + kBlockM;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t4 = lane & 3;
  const std::int64_t bh = blockIdx.x, b = bh / p.heads, h = bh % p.heads;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.y) * kBlockN;
  const auto head_of = [&](const ConstAttentionRef& r) {
    return static_cast<const T*>(r.data) + b * r.strides.batch + h * r.strides.head;
  };
  const T* q = head_of(p.q);
  const T* k = head_of(p.k);
  const T* v = head_of(p.v);
  const T* d_o = head_of(p.grad_out);

  load_rows<T, D, kBlockN>(k_tile, k_transposed, k, p.k.strides.token, n0, p.key_len);
  load_rows<T, D, kBlockN>(v_tile, nullptr, v, p.v.strides.token, n0, p.key_len);

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[dn][e] = dv[dn][e] = 0.f;
  }
  const float scale_log2 = p.scale * kLog2e;
  const std::int64_t key_base = n0 + warp * 16 + g;  // this thread's keys: key_base and key_base + 8
  const std::int64_t m_start = p.causal ? n0 : 0;     // causal: rows before n0 see none of these keys
  const float* lse_head = lse + bh * p.query_len;
  const float* delta_head = delta + bh * p.query_len;
  float* dq_head = dq_accumulator + bh * p.query_len * p.head_dim;

  for (std::int64_t m0 = m_start; m0 < p.query_len; m0 += kBlockM) {
    __syncthreads();  // every warp is done with the previous tiles (dS included)
    load_rows<T, D, kBlockM>(q_tile, q_transposed, q, p.q.strides.token, m0, p.query_len);
    load_rows<T, D, kBlockM>(do_tile, do_transposed, d_o, p.grad_out.strides.token, m0, p.query_len);
    for (int i = threadIdx.x; i < kBlockM; i += kThreads) {
      const bool in = m0 + i < p.query_len;
      lse_tile[i] = in ? lse_head[m0 + i] * kLog2e : 0.f;
      delta_tile[i] = in ? delta_head[m0 + i] : 0.f;
    }
    __syncthreads();

    // S^T = K Q^T for this warp's 16 keys and the tile's 64 queries, then P^T.
    float pt[kBlockM / 8][4];
#pragma unroll
    for (int j = 0; j < kBlockM / 8; ++j) pt[j][0] = pt[j][1] = pt[j][2] = pt[j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      std::uint32_t a_frag[4];
      load_a(a_frag, k_tile, ld, warp * 16, kk * 16, lane);
#pragma unroll
      for (int j = 0; j < kBlockM / 8; ++j) {
        std::uint32_t b_frag[2];
        load_b(b_frag, q_tile, ld, j * 8, kk * 16, lane);
        mma_16x8x16<T>(pt[j], a_frag, b_frag);
      }
    }
#pragma unroll
    for (int j = 0; j < kBlockM / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = j * 8 + 2 * t4 + (e & 1);  // query within the tile
        const std::int64_t key = key_base + (e >= 2 ? 8 : 0), row = m0 + col;
        const bool live = row < p.query_len && visible(row, key, p.key_len, p.causal);
        pt[j][e] = live ? exp2f(pt[j][e] * scale_log2 - lse_tile[col]) : 0.f;
      }
    }
    // dV += P^T dO.
#pragma unroll
    for (int kk = 0; kk < kBlockM / 16; ++kk) {
      const std::uint32_t a_frag[4] = {pack2<T>(pt[2 * kk][0], pt[2 * kk][1]), pack2<T>(pt[2 * kk][2], pt[2 * kk][3]),
                                       pack2<T>(pt[2 * kk + 1][0], pt[2 * kk + 1][1]),
                                       pack2<T>(pt[2 * kk + 1][2], pt[2 * kk + 1][3])};
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
        std::uint32_t b_frag[2];
        load_b(b_frag, do_transposed, ldt, dn * 8, kk * 16, lane);
        mma_16x8x16<T>(dv[dn], a_frag, b_frag);
      }
    }
    // dP^T = V dO^T, then dS^T = P^T * (dP^T - delta) in place of P^T.
    float dpt[kBlockM / 8][4];
#pragma unroll
    for (int j = 0; j < kBlockM / 8; ++j) dpt[j][0] = dpt[j][1] = dpt[j][2] = dpt[j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      std::uint32_t a_frag[4];
      load_a(a_frag, v_tile, ld, warp * 16, kk * 16, lane);
#pragma unroll
      for (int j = 0; j < kBlockM / 8; ++j) {
        std::uint32_t b_frag[2];
        load_b(b_frag, do_tile, ld, j * 8, kk * 16, lane);
        mma_16x8x16<T>(dpt[j], a_frag, b_frag);
      }
    }
#pragma unroll
    for (int j = 0; j < kBlockM / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = j * 8 + 2 * t4 + (e & 1);
        pt[j][e] = pt[j][e] * (dpt[j][e] - delta_tile[col]);
        // dS as [query][key] for the dQ product below.
        ds_tile[col * ldt + warp * 16 + g + (e >= 2 ? 8 : 0)] = from_float<T>(pt[j][e]);
      }
    }
    // dK += dS^T Q.
#pragma unroll
    for (int kk = 0; kk < kBlockM / 16; ++kk) {
      const std::uint32_t a_frag[4] = {pack2<T>(pt[2 * kk][0], pt[2 * kk][1]), pack2<T>(pt[2 * kk][2], pt[2 * kk][3]),
                                       pack2<T>(pt[2 * kk + 1][0], pt[2 * kk + 1][1]),
                                       pack2<T>(pt[2 * kk + 1][2], pt[2 * kk + 1][3])};
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
        std::uint32_t b_frag[2];
        load_b(b_frag, q_transposed, ldt, dn * 8, kk * 16, lane);
        mma_16x8x16<T>(dk[dn], a_frag, b_frag);
      }
    }
    __syncthreads();  // dS complete
    // dQ (this warp's 16 queries) += dS K, into the float32 accumulator.
    float dq[D / 8][4];
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) dq[dn][0] = dq[dn][1] = dq[dn][2] = dq[dn][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      std::uint32_t a_frag[4];
      load_a(a_frag, ds_tile, ldt, warp * 16, kk * 16, lane);
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
        std::uint32_t b_frag[2];
        load_b(b_frag, k_transposed, ldt, dn * 8, kk * 16, lane);
        mma_16x8x16<T>(dq[dn], a_frag, b_frag);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const std::int64_t row = m0 + warp * 16 + g + 8 * r;
      if (row >= p.query_len) continue;
      float* dq_row = dq_head + row * p.head_dim;
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
        atomicAdd(dq_row + dn * 8 + 2 * t4, dq[dn][2 * r]);
        atomicAdd(dq_row + dn * 8 + 2 * t4 + 1, dq[dn][2 * r + 1]);
      }
    }
  }

  const auto out_head = [&](const AttentionRef& r) {
    return static_cast<T*>(r.data) + b * r.strides.batch + h * r.strides.head;
  };
  T* grad_k = out_head(p.grad_k);
  T* grad_v = out_head(p.grad_v);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const std::int64_t key = key_base + 8 * r;
    if (key >= p.key_len) continue;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      const int d = dn * 8 + 2 * t4;
      *reinterpret_cast<std::uint32_t*>(grad_k + key * p.grad_k.strides.token + d) =
          pack2<T>(dk[dn][2 * r] * p.scale, dk[dn][2 * r + 1] * p.scale);
      *reinterpret_cast<std::uint32_t*>(grad_v + key * p.grad_v.strides.token + d) =
          pack2<T>(dv[dn][2 * r], dv[dn][2 * r + 1]);
    }
  }
}

template <typename T, int D>
void launch_backward(const Context& ctx, const FlashParams& params, const float* lse, const float* delta,
                     float* dq_accumulator) {
  constexpr std::size_t shared = backward_shared_bytes<D>();
  const auto kernel = &flash_backward_kernel<T, D>;
  prepare_flash_launch(ctx, reinterpret_cast<const void*>(kernel), shared);
  const dim3 grid = flash_grid(params, params.key_len);
  kernel<<<grid, kThreads, shared, stream_of(ctx.stream)>>>(params, lse, delta, dq_accumulator);
  SUBLET_CUDA_LAUNCH_CHECK(flash_backward_kernel);
}

template <typename T>
void backward_typed(const Context& ctx, const FlashParams& params, const float* lse) {
  const cudaStream_t stream = stream_of(ctx.stream);
  const std::int64_t rows = params.batch * params.heads * params.query_len;
  memory::ScopedBlock delta_block = ctx.workspace(static_cast<std::size_t>(rows) * sizeof(float));
  memory::ScopedBlock dq_block = ctx.workspace(static_cast<std::size_t>(rows * params.head_dim) * sizeof(float));
  auto* delta = static_cast<float*>(delta_block.get());
  auto* dq_accumulator = static_cast<float*>(dq_block.get());
  SUBLET_CUDA_CHECK(cudaMemsetAsync(dq_accumulator, 0, static_cast<std::size_t>(rows * params.head_dim) * sizeof(float), stream));
  row_dot_kernel<T><<<grid_for(rows * 32), kBlockThreads, 0, stream>>>(params, delta);
  SUBLET_CUDA_LAUNCH_CHECK(row_dot_kernel);
  switch (params.head_dim) {
    case 16: launch_backward<T, 16>(ctx, params, lse, delta, dq_accumulator); break;
    case 32: launch_backward<T, 32>(ctx, params, lse, delta, dq_accumulator); break;
    case 64: launch_backward<T, 64>(ctx, params, lse, delta, dq_accumulator); break;
    case 128: launch_backward<T, 128>(ctx, params, lse, delta, dq_accumulator); break;
    default: throw ShapeError("scaled_dot_product_attention: no fused kernel for head dim " + std::to_string(params.head_dim));
  }
  write_grad_query_kernel<T><<<grid_for(rows * params.head_dim), kBlockThreads, 0, stream>>>(params, dq_accumulator);
  SUBLET_CUDA_LAUNCH_CHECK(write_grad_query_kernel);
}

}  // namespace

void flash_attention_backward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                              ConstAttentionRef key, ConstAttentionRef value, ConstAttentionRef out,
                              ConstAttentionRef grad_out, const float* lse, AttentionRef grad_query,
                              AttentionRef grad_key, AttentionRef grad_value) {
  memory::CudaDeviceGuard device(ctx.device);
  FlashParams params = flash_params(shape, query, key, value, {});
  params.o = out;
  params.grad_out = grad_out;
  params.grad_q = grad_query;
  params.grad_k = grad_key;
  params.grad_v = grad_value;
  if (dtype == DType::BFloat16) {
    backward_typed<__nv_bfloat16>(ctx, params, lse);
  } else {
    backward_typed<__half>(ctx, params, lse);
  }
}

}  // namespace sublet::ops::cuda::detail
