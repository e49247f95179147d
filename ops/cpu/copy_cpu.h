#pragma once
#include "ops/copy.h"

namespace sublet::ops::cpu {
void copy(const Shape& sizes, DType dst_dtype, StridedRef dst, DType src_dtype, ConstStridedRef src);
void fill(DType dtype, const Shape& sizes, StridedRef dst, double value);
}
