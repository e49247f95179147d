#include "ops/cpu/linear_bias_cpu.h"

#include "ops/cpu/matmul_cpu.h"

namespace sublet::ops::cpu {

template <typename T>
bool linear_bias(const Context& ctx, DType dtype, const LinearBiasGeometry& g, void* out, const void* x,
                 const void* w, const void* bias) {
  // x [m, k] row-major times w [n, k] read transposed (a column-major [k, n]).
  MatmulGeometry mg;
  mg.m = g.m;
  mg.k = g.k;
  mg.n = g.n;
  mg.a_row_stride = g.k;
  mg.a_col_stride = 1;
  mg.b_row_stride = 1;
  mg.b_col_stride = g.k;
  matmul<T>(ctx, dtype, mg, out, x, w);
  auto* y = static_cast<T*>(out);
  const auto* b = static_cast<const T*>(bias);
  for (std::int64_t row = 0; row < g.m; ++row) {
    T* y_row = y + row * g.n;
    for (std::int64_t col = 0; col < g.n; ++col) y_row[col] += b[col];
  }
  return true;
}

template bool linear_bias<float>(const Context&, DType, const LinearBiasGeometry&, void*, const void*, const void*,
                                 const void*);
template bool linear_bias<double>(const Context&, DType, const LinearBiasGeometry&, void*, const void*, const void*,
                                  const void*);

}  // namespace sublet::ops::cpu
