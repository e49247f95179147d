#pragma once
// Batched matrix product out[b] = a[b] @ b[b] with out contiguous [batch, m, n]. Operands are
// strided views: batch stride 0 broadcasts one matrix over the batch, and a transposed view is
// read in place. Each matrix must be row-major or column-major with a unit stride somewhere
// (matmul_operand_ok); the runtime copies other layouts first.
#include "ops/context.h"
#include "core/dtype.h"
#include "ops/strided.h"

namespace sublet::ops {

struct MatmulGeometry {
  std::int64_t batch = 1, m = 0, k = 0, n = 0;
  std::int64_t a_batch_stride = 0, a_row_stride = 0, a_col_stride = 0;  // a is [m, k]
  std::int64_t b_batch_stride = 0, b_row_stride = 0, b_col_stride = 0;  // b is [k, n]
};

bool matmul_operand_ok(std::int64_t rows, std::int64_t cols, std::int64_t row_stride, std::int64_t col_stride);

// Float32 and float64; on CUDA also bfloat16 and float16 (float32 accumulation). DTypeError otherwise.
void matmul(const Context& ctx, DType dtype, const MatmulGeometry& geometry, void* out, const void* a,
            const void* b);

}  // namespace sublet::ops
