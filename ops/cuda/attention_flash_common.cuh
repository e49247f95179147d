#pragma once
// What the fused attention kernels share (ops/cuda/attention_flash_forward.cu and _backward.cu):
// the tile sizes, the tensor-core product and its register fragments, and the copies of a tile
// of rows from global to shared memory.
//
// Fragments follow PTX's mma.m16n8k16 layout: in a warp, lane = 4 * g + t (g = lane / 4, t =
// lane % 4). A (16 x 16, row-major): a[0] = rows g, cols 2t..2t+1; a[1] = row g+8, same cols;
// a[2] = row g, cols 2t+8..2t+9; a[3] = row g+8, cols 2t+8..2t+9. B (16 x 8, K x N): b[0] =
// rows 2t..2t+1 of column g; b[1] = rows 2t+8..2t+9. C (16 x 8, float32): c[0..1] = row g,
// cols 2t..2t+1; c[2..3] = row g+8. So the C fragments of two adjacent 8-column tiles are,
// packed to 16 bits, the A fragment of the next product over those 16 columns (FlashAttention-2's
// register reuse of P), with no trip through shared memory.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "ops/attention.h"

namespace sublet::ops::cuda::flash {

inline constexpr int kBlockM = 64;   // query rows per block (16 per warp)
inline constexpr int kBlockN = 64;   // keys per tile
inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * 32;
inline constexpr int kPad = 8;       // 16 bytes per shared row: aligned vector stores, no bank conflicts
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

// c += a b on the tensor cores, 16-bit inputs, float32 accumulators.
template <typename T>
__device__ inline void mma_16x8x16(float (&c)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#else
  __trap();  // the host side refuses devices before sm_80 (flash_attention_device_ok)
#endif
}

// Two floats rounded to 16 bits, the first in the low half (the lower column).
template <typename T>
__device__ inline std::uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<std::uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<std::uint32_t*>(&v);
  }
}

template <typename T>
__device__ inline float to_float(T v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v); else return __half2float(v);
}
template <typename T>
__device__ inline T from_float(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(v); else return __float2half_rn(v);
}

template <typename T>
__device__ inline std::uint32_t load32(const T* p) {
  return *reinterpret_cast<const std::uint32_t*>(p);
}

// A fragment of the 16 x 16 block at (row0, k0) of row-major x (row stride ld).
template <typename T>
__device__ inline void load_a(std::uint32_t (&a)[4], const T* x, int ld, int row0, int k0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const T* p = x + (row0 + g) * ld + k0 + 2 * t;
  a[0] = load32(p);
  a[1] = load32(p + 8 * ld);
  a[2] = load32(p + 8);
  a[3] = load32(p + 8 * ld + 8);
}

// B fragment (16 x 8, K x N) at (k0, n0) of B = y^T, y row-major [N][K] (row stride ld).
template <typename T>
__device__ inline void load_b(std::uint32_t (&b)[2], const T* y, int ld, int n0, int k0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const T* p = y + (n0 + g) * ld + k0 + 2 * t;
  b[0] = load32(p);
  b[1] = load32(p + 8);
}

// Rows [row0, row0 + kRows) of one head's [len, D] operand (row stride `token_stride`) into
// shared `tile` [kRows][D + kPad], and, when `transposed` is set, into `transposed`
// [D][kRows + kPad] too. Rows past `len` are zeros. 16-byte loads: rows are 16-byte aligned.
template <typename T, int D, int kRows>
__device__ inline void load_rows(T* tile, T* transposed, const T* head, std::int64_t token_stride, std::int64_t row0,
                                 std::int64_t len) {
  constexpr int kChunks = D / 8;  // 8 elements of 16 bits per 16-byte chunk
  for (int i = threadIdx.x; i < kRows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = (i % kChunks) * 8;
    uint4 chunk = make_uint4(0, 0, 0, 0);
    if (row0 + r < len) chunk = *reinterpret_cast<const uint4*>(head + (row0 + r) * token_stride + c);
    if (tile != nullptr) *reinterpret_cast<uint4*>(tile + r * (D + kPad) + c) = chunk;
    if (transposed != nullptr) {
      const T* e = reinterpret_cast<const T*>(&chunk);
#pragma unroll
      for (int j = 0; j < 8; ++j) transposed[(c + j) * (kRows + kPad) + r] = e[j];
    }
  }
}

// Whether query `row` may use key `col` of a tile (in range and not masked).
__device__ inline bool visible(std::int64_t row, std::int64_t col, std::int64_t key_len, bool causal) {
  return col < key_len && !attention_masked(row, col, causal);
}

}  // namespace sublet::ops::cuda::flash
