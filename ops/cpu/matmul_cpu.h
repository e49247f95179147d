#pragma once
#include "ops/matmul.h"

namespace sublet::ops::cpu {
void matmul(DType dtype, const MatmulGeometry& geometry, void* out, const void* a, const void* b);
}
