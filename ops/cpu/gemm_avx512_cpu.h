#pragma once
// float32 GEMM through Eigen's AVX-512 kernels, for builds whose -march stops at AVX2: this one
// file is compiled with AVX-512 enabled and its copy of Eigen lives in a namespace of its own,
// so its template instances cannot be merged with the AVX2 ones of the other files at link time.
// Call only when cpu_has_avx512() (ops/cpu/conv2d_avx512_tiles.h) is true.
#include <cstdint>

namespace sublet::ops::cpu {

// A row-major matrix view: rows x cols, element (r, c) at data[r * stride + c]; transposed
// reads it as its transpose (cols x rows).
struct GemmOperand {
  const float* data;
  std::int64_t stride;
  bool transposed;
};

// c[m x n] (row-major, row stride ldc) = a * b, or c += a * b when accumulate; a is m x k and b
// is k x n after their transposes. Inside an OpenMP parallel region it runs on the calling
// thread, outside it Eigen spreads it over the OpenMP threads (as the AVX2 path does).
void gemm_avx512(std::int64_t m, std::int64_t n, std::int64_t k, GemmOperand a, GemmOperand b,
                 float* c, std::int64_t ldc, bool accumulate);

// True when this build has gemm_avx512 (GCC or Clang on x86-64).
bool gemm_avx512_built();

}  // namespace sublet::ops::cpu
