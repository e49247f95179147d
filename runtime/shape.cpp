#include "runtime/shape.h"

#include "core/errors.h"

namespace sublet {

std::string shape_str(const Shape& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  std::int64_t stride = 1;
  for (std::size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= std::max<std::int64_t>(sizes[d], 1);
  }
  return strides;
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const std::size_t nd = std::max(a.size(), b.size());
  Shape out(nd);
  for (std::size_t i = 0; i < nd; ++i) {
    const std::int64_t da = i < nd - a.size() ? 1 : a[i - (nd - a.size())];
    const std::int64_t db = i < nd - b.size() ? 1 : b[i - (nd - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw ShapeError(std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) + " cannot be broadcast");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const char* op, const Shape& sizes, const Shape& strides, const Shape& target) {
  if (sizes.size() > target.size()) {
    throw ShapeError(std::string(op) + ": cannot broadcast shape " + shape_str(sizes) + " to " + shape_str(target));
  }
  Shape out(target.size(), 0);
  const std::size_t lead = target.size() - sizes.size();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == target[lead + i]) {
      out[lead + i] = strides[i];
    } else if (sizes[i] != 1) {
      throw ShapeError(std::string(op) + ": cannot broadcast shape " + shape_str(sizes) + " to " + shape_str(target));
    }
  }
  return out;
}

std::int64_t wrap_dim(const char* op, std::int64_t dim, const Shape& shape) {
  const auto nd = static_cast<std::int64_t>(shape.size());
  const std::int64_t wrapped = dim < 0 ? dim + nd : dim;
  if (wrapped < 0 || wrapped >= nd) {
    throw ShapeError(std::string(op) + ": dimension " + std::to_string(dim) + " is out of range for a " +
                     std::to_string(nd) + "-D tensor of shape " + shape_str(shape));
  }
  return wrapped;
}

}  // namespace sublet
