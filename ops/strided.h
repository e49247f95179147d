#pragma once
// How tensor kernels see their operands: a base pointer (storage offset already applied) and
// one stride per dimension of the op's iteration shape, in elements. A broadcast dimension has
// stride 0, a transposed one swapped strides: kernels read views in place, without copies.
#include <cstdint>
#include <vector>

#include "core/shape_vector.h"

namespace sublet::ops {

struct StridedRef {
  void* data = nullptr;
  Shape strides;
};

struct ConstStridedRef {
  const void* data = nullptr;
  Shape strides;
};

}  // namespace sublet::ops
