#include "ops/cpu/gemm_avx512_cpu.h"

#include "core/errors.h"

// This file is compiled with -mavx512f/vl/dq/bw (ops/nn_kernels.cmake). Eigen is renamed before
// it is included: its templates instantiated here are AVX-512 code, and under the name Eigen
// they would share symbols with the AVX2 instances of the other files, one of which the linker
// would keep for both.
#if defined(__AVX512F__)
#define Eigen sublet_eigen_avx512
#include <Eigen/Core>
#define SUBLET_GEMM_AVX512 1
#endif

namespace sublet::ops::cpu {

bool gemm_avx512_built() {
#ifdef SUBLET_GEMM_AVX512
  return true;
#else
  return false;
#endif
}

#ifdef SUBLET_GEMM_AVX512

namespace {

using Outer = Eigen::OuterStride<>;
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ColMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using RowView = Eigen::Map<const RowMatrix, Eigen::Unaligned, Outer>;
// A transposed row-major matrix is the column-major matrix on the same memory.
using ColView = Eigen::Map<const ColMatrix, Eigen::Unaligned, Outer>;

template <typename A, typename B>
void product(const A& a, const B& b, float* c, std::int64_t m, std::int64_t n, std::int64_t ldc,
             bool accumulate) {
  Eigen::Map<RowMatrix, Eigen::Unaligned, Outer> out(c, m, n, Outer(ldc));
  if (accumulate) {
    out.noalias() += a * b;
  } else {
    out.noalias() = a * b;
  }
}

template <typename A>
void with_b(const A& a, std::int64_t n, std::int64_t k, GemmOperand b, float* c, std::int64_t m,
            std::int64_t ldc, bool accumulate) {
  if (b.transposed) {
    product(a, ColView(b.data, k, n, Outer(b.stride)), c, m, n, ldc, accumulate);
  } else {
    product(a, RowView(b.data, k, n, Outer(b.stride)), c, m, n, ldc, accumulate);
  }
}

}  // namespace

void gemm_avx512(std::int64_t m, std::int64_t n, std::int64_t k, GemmOperand a, GemmOperand b,
                 float* c, std::int64_t ldc, bool accumulate) {
  if (a.transposed) {
    with_b(ColView(a.data, m, k, Outer(a.stride)), n, k, b, c, m, ldc, accumulate);
  } else {
    with_b(RowView(a.data, m, k, Outer(a.stride)), n, k, b, c, m, ldc, accumulate);
  }
}

#else

void gemm_avx512(std::int64_t, std::int64_t, std::int64_t, GemmOperand, GemmOperand, float*,
                 std::int64_t, bool) {
  throw Error("gemm_avx512: not built (needs GCC or Clang on x86-64)");
}

#endif

}  // namespace sublet::ops::cpu
