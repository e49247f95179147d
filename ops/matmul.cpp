#include "ops/matmul.h"

#include "core/errors.h"
#include "ops/matmul_kernels.h"

namespace sublet::ops {

bool matmul_operand_ok(std::int64_t rows, std::int64_t cols, std::int64_t row_stride, std::int64_t col_stride) {
  const bool row_major = (cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= cols);
  const bool col_major = (rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= rows);
  return row_major || col_major;
}

void matmul(const Context& ctx, DType dtype, const MatmulGeometry& geometry, void* out, const void* a,
            const void* b) {
  if (!matmul_operand_ok(geometry.m, geometry.k, geometry.a_row_stride, geometry.a_col_stride) ||
      !matmul_operand_ok(geometry.k, geometry.n, geometry.b_row_stride, geometry.b_col_stride)) {
    throw ValueError("matmul: operands must have a unit stride along rows or columns (call contiguous() first)");
  }
  matmul_kernels().get("matmul", ctx.device, dtype)(ctx, dtype, geometry, out, a, b);
}

}  // namespace sublet::ops
