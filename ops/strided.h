#pragma once
// How tensor kernels see their operands: a base pointer (storage offset already applied) and
// one stride per dimension of the op's iteration shape, in elements. A broadcast dimension has
// stride 0, a transposed one swapped strides: kernels read views in place, without copies.
#include <cstdint>
#include <vector>

#include "ops/shape_vector.h"

namespace sublet::ops {

using Shape = ShapeVector;

struct StridedRef {
  void* data = nullptr;
  Shape strides;
};

struct ConstStridedRef {
  const void* data = nullptr;
  Shape strides;
};

inline std::int64_t shape_numel(const Shape& sizes) {
  std::int64_t n = 1;
  for (auto s : sizes) n *= s;
  return n;
}

}  // namespace sublet::ops
