#pragma once
#include "ops/matmul.h"

namespace sublet::ops::cpu {
// Templates on the element type with the op's kernel signature (ops/matmul_kernels.h), so that
// ops/cpu/register_cpu_kernels.cpp registers one instantiation per dtype; ctx and dtype are unused here.
// Instantiated for float and double.
template <typename T>
void matmul(const Context& ctx, DType dtype, const MatmulGeometry& geometry, void* out, const void* a, const void* b);
}
