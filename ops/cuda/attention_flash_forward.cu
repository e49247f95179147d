// The fused attention forward (FlashAttention-2's algorithm) for bfloat16 and float16: a block
// holds 64 query rows (16 per warp, their fragments in registers) and streams the keys and values
// through shared memory in tiles of 64; each warp keeps its rows' running max and sum (online
// softmax, in the log2 domain) and its float32 output accumulators, rescaling them as the max
// grows. Scores live only in registers, one 16 x 64 tile per warp at a time. The output is
// divided by the row sums at the end and the row's log-sum-exp (natural log) saved for backward.
#include <cuda_runtime.h>

#include <climits>
#include <string>

#include "core/errors.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/attention_flash_common.cuh"
#include "ops/cuda/attention_flash_launch.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/stream.h"

namespace sublet::ops::cuda::detail {

namespace {

using namespace flash;

template <int D>
constexpr std::size_t forward_shared_bytes() {
  // Q and K tiles [64][D + pad], V transposed [D][64 + pad], all 16-bit.
  return 2 * (2 * kBlockM * (D + kPad) + D * (kBlockN + kPad));
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) flash_forward_kernel(FlashParams p, float* lse) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* q_tile = reinterpret_cast<T*>(shared_bytes);
  T* k_tile = q_tile + kBlockM * (D + kPad);
  T* v_transposed = k_tile + kBlockN * (D + kPad);
  constexpr int ld = D + kPad, ldt = kBlockN + kPad;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t4 = lane & 3;
  const std::int64_t bh = blockIdx.x, b = bh / p.heads, h = bh % p.heads;
  const std::int64_t m0 = static_cast<std::int64_t>(gridDim.y - 1 - blockIdx.y) * kBlockM;  // long rows first
  const T* q = static_cast<const T*>(p.q.data) + b * p.q.strides.batch + h * p.q.strides.head;
  const T* k = static_cast<const T*>(p.k.data) + b * p.k.strides.batch + h * p.k.strides.head;
  const T* v = static_cast<const T*>(p.v.data) + b * p.v.strides.batch + h * p.v.strides.head;

  load_rows<T, D, kBlockM>(q_tile, nullptr, q, p.q.strides.token, m0, p.query_len);
  __syncthreads();
  std::uint32_t q_frag[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) load_a(q_frag[kk], q_tile, ld, warp * 16, kk * 16, lane);

  float acc[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn) acc[dn][0] = acc[dn][1] = acc[dn][2] = acc[dn][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};  // of scale * log2(e) * score
  float row_sum[2] = {0.f, 0.f};               // this thread's share; the quad's sum at the end
  const float scale_log2 = p.scale * kLog2e;
  const std::int64_t row_base = m0 + warp * 16 + g;  // rows row_base and row_base + 8
  const std::int64_t key_end = p.causal ? min(p.key_len, m0 + kBlockM) : p.key_len;

  for (std::int64_t n0 = 0; n0 < key_end; n0 += kBlockN) {
    __syncthreads();  // every warp is done with the previous tiles
    load_rows<T, D, kBlockN>(k_tile, nullptr, k, p.k.strides.token, n0, p.key_len);
    load_rows<T, D, kBlockN>(nullptr, v_transposed, v, p.v.strides.token, n0, p.key_len);
    __syncthreads();

    float s[kBlockN / 8][4];
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) {
        std::uint32_t b_frag[2];
        load_b(b_frag, k_tile, ld, j * 8, kk * 16, lane);
        mma_16x8x16<T>(s[j], q_frag[kk], b_frag);
      }
    }
    // Mask, scale into the log2 domain, and the rows' new max.
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const std::int64_t row = row_base + (e >= 2 ? 8 : 0), col = n0 + j * 8 + 2 * t4 + (e & 1);
        s[j][e] = visible(row, col, p.key_len, p.causal) ? s[j][e] * scale_log2 : -INFINITY;
        tile_max[e >> 1] = fmaxf(tile_max[e >> 1], s[j][e]);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float new_max = fmaxf(row_max[r], tile_max[r]);
      const float base = new_max == -INFINITY ? 0.f : new_max;  // a row with nothing visible yet
      const float correction = exp2f(row_max[r] - base);
      row_max[r] = new_max;
      row_sum[r] *= correction;
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
        acc[dn][2 * r] *= correction;
        acc[dn][2 * r + 1] *= correction;
      }
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) {
        s[j][2 * r] = exp2f(s[j][2 * r] - base);
        s[j][2 * r + 1] = exp2f(s[j][2 * r + 1] - base);
        row_sum[r] += s[j][2 * r] + s[j][2 * r + 1];
      }
    }
    // acc += P V, P straight from the score registers.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const std::uint32_t a_frag[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                       pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                       pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
        std::uint32_t b_frag[2];
        load_b(b_frag, v_transposed, ldt, dn * 8, kk * 16, lane);
        mma_16x8x16<T>(acc[dn], a_frag, b_frag);
      }
    }
  }

  T* out = static_cast<T*>(p.out.data) + b * p.out.strides.batch + h * p.out.strides.head;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = row_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const std::int64_t row = row_base + 8 * r;
    if (row >= p.query_len) continue;
    const float inv = 1.f / sum;
    T* out_row = out + row * p.out.strides.token;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      *reinterpret_cast<std::uint32_t*>(out_row + dn * 8 + 2 * t4) =
          pack2<T>(acc[dn][2 * r] * inv, acc[dn][2 * r + 1] * inv);
    }
    if (t4 == 0) lse[bh * p.query_len + row] = (row_max[r] + log2f(sum)) * kLn2;
  }
}

template <typename T, int D>
void launch_forward(const Context& ctx, const FlashParams& params, float* lse) {
  constexpr std::size_t shared = forward_shared_bytes<D>();
  const auto kernel = &flash_forward_kernel<T, D>;
  prepare_flash_launch(ctx, reinterpret_cast<const void*>(kernel), shared);
  const dim3 grid = flash_grid(params, params.query_len);
  kernel<<<grid, kThreads, shared, stream_of(ctx.stream)>>>(params, lse);
  SUBLET_CUDA_LAUNCH_CHECK(flash_forward_kernel);
}

template <typename T>
void forward_typed(const Context& ctx, const FlashParams& params, float* lse) {
  switch (params.head_dim) {
    case 16: launch_forward<T, 16>(ctx, params, lse); return;
    case 32: launch_forward<T, 32>(ctx, params, lse); return;
    case 64: launch_forward<T, 64>(ctx, params, lse); return;
    case 128: launch_forward<T, 128>(ctx, params, lse); return;
    default: throw ShapeError("scaled_dot_product_attention: no fused kernel for head dim " + std::to_string(params.head_dim));
  }
}

}  // namespace

bool flash_attention_supports(std::int64_t head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128;
}

void flash_attention_forward(const Context& ctx, const AttentionShape& shape, DType dtype, ConstAttentionRef query,
                             ConstAttentionRef key, ConstAttentionRef value, AttentionRef out, float* lse) {
  memory::CudaDeviceGuard device(ctx.device);
  const FlashParams params = flash_params(shape, query, key, value, {out.data, out.strides});
  if (dtype == DType::BFloat16) {
    forward_typed<__nv_bfloat16>(ctx, params, lse);
  } else {
    forward_typed<__half>(ctx, params, lse);
  }
}

}  // namespace sublet::ops::cuda::detail
