#pragma once
// Shape arithmetic shared by the tensor ops: printing, contiguous strides, broadcasting and
// dimension wrapping, each throwing ShapeError with the op's name and the shapes involved.
#include <cstdint>
#include <string>
#include <vector>

#include "core/shape_vector.h"
#include "ops/strided.h"

namespace sublet {

std::string shape_str(const Shape& shape);  // "[2, 3]"
Shape contiguous_strides(const Shape& sizes);

// NumPy broadcasting: "add: shapes [2, 3] and [4, 3] cannot be broadcast".
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Strides that read `sizes`/`strides` as if expanded to `target` (stride 0 on broadcast dims).
Shape broadcast_strides(const char* op, const Shape& sizes, const Shape& strides, const Shape& target);

// Negative dims count from the end; throws ShapeError naming op, dim and shape when out of range.
std::int64_t wrap_dim(const char* op, std::int64_t dim, const Shape& shape);

}  // namespace sublet
