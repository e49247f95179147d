#include "ops/cpu/matmul_cpu.h"

#include <Eigen/Core>

#include "core/errors.h"

namespace sublet::ops::cpu {
namespace {

template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using Outer = Eigen::OuterStride<>;

// A strided matrix seen by Eigen without copying: row-major when its columns are adjacent,
// column-major when its rows are (a transposed view).
struct MatrixLayout {
  bool row_major = true;
  std::int64_t outer_stride = 0;
};

MatrixLayout layout_of(std::int64_t rows, std::int64_t cols, std::int64_t row_stride, std::int64_t col_stride) {
  if (cols == 1 || col_stride == 1) return {true, rows == 1 ? cols : std::max(row_stride, cols)};
  return {false, cols == 1 ? rows : std::max(col_stride, rows)};
}

template <typename T, typename MA, typename MB>
void product(T* out, std::int64_t m, std::int64_t n, const MA& a, const MB& b) {
  Eigen::Map<RowMajor<T>> result(out, m, n);
  result.noalias() = a * b;
}

template <typename T>
void one_matrix(const MatmulGeometry& g, T* out, const T* a, const T* b) {
  const MatrixLayout la = layout_of(g.m, g.k, g.a_row_stride, g.a_col_stride);
  const MatrixLayout lb = layout_of(g.k, g.n, g.b_row_stride, g.b_col_stride);
  using RA = Eigen::Map<const RowMajor<T>, Eigen::Unaligned, Outer>;
  using CA = Eigen::Map<const ColMajor<T>, Eigen::Unaligned, Outer>;
  if (la.row_major && lb.row_major) {
    product<T>(out, g.m, g.n, RA(a, g.m, g.k, Outer(la.outer_stride)), RA(b, g.k, g.n, Outer(lb.outer_stride)));
  } else if (la.row_major) {
    product<T>(out, g.m, g.n, RA(a, g.m, g.k, Outer(la.outer_stride)), CA(b, g.k, g.n, Outer(lb.outer_stride)));
  } else if (lb.row_major) {
    product<T>(out, g.m, g.n, CA(a, g.m, g.k, Outer(la.outer_stride)), RA(b, g.k, g.n, Outer(lb.outer_stride)));
  } else {
    product<T>(out, g.m, g.n, CA(a, g.m, g.k, Outer(la.outer_stride)), CA(b, g.k, g.n, Outer(lb.outer_stride)));
  }
}

template <typename T>
void matmul_typed(const MatmulGeometry& g, T* out, const T* a, const T* b) {
  if (g.k == 0) {
    for (std::int64_t i = 0; i < g.batch * g.m * g.n; ++i) out[i] = T(0);
    return;
  }
  if (g.m == 0 || g.n == 0) return;
  // Many small matrices: one per thread. One large matrix: Eigen splits the product itself.
  const bool split_batch = g.batch > 1 && g.m * g.n * g.k < (1 << 20);
#pragma omp parallel for schedule(static) if (split_batch)
  for (std::int64_t i = 0; i < g.batch; ++i) {
    one_matrix<T>(g, out + i * g.m * g.n, a + i * g.a_batch_stride, b + i * g.b_batch_stride);
  }
}

}  // namespace

template <typename T>
void matmul(const Context&, DType, const MatmulGeometry& geometry, void* out, const void* a, const void* b) {
  matmul_typed<T>(geometry, static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b));
}

template void matmul<float>(const Context&, DType, const MatmulGeometry&, void*, const void*, const void*);
template void matmul<double>(const Context&, DType, const MatmulGeometry&, void*, const void*, const void*);

}  // namespace sublet::ops::cpu
