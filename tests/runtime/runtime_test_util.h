#pragma once
// Shared helpers for runtime tests: seeded random tensors, naive references, allocator readings.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.h"
#include "memory/registry.h"
#include "runtime/factories.h"
#include "runtime/tensor.h"

namespace sublet::testing {

inline Tensor random64(const Shape& sizes, std::uint64_t seed, bool requires_grad = false) {
  Generator g(seed);
  return randn(sizes, g, TensorOptions().dtype(DType::Float64).requires_grad(requires_grad));
}

inline Tensor random32(const Shape& sizes, std::uint64_t seed) {
  Generator g(seed);
  return randn(sizes, g);
}

inline std::size_t cpu_allocated() { return memory_allocated(Device::cpu()); }
inline std::size_t cpu_reserved() { return memory_reserved(Device::cpu()); }
inline std::int64_t cpu_allocation_count() {
  return memory::allocator_for(Device::cpu()).stats().allocation[memory::StatType::All].current;
}

// Element of a row-major index for any strided tensor, read through to_vector of a contiguous copy.
inline std::vector<std::int64_t> unravel(std::int64_t linear, const Shape& sizes) {
  std::vector<std::int64_t> index(sizes.size());
  for (std::size_t d = sizes.size(); d-- > 0;) {
    index[d] = linear % sizes[d];
    linear /= sizes[d];
  }
  return index;
}

inline std::int64_t ravel(const std::vector<std::int64_t>& index, const Shape& sizes) {
  std::int64_t linear = 0;
  for (std::size_t d = 0; d < sizes.size(); ++d) linear = linear * sizes[d] + index[d];
  return linear;
}

// The row-major linear index into `sizes` that broadcast index `out_index` reads.
inline std::int64_t broadcast_source(const std::vector<std::int64_t>& out_index, const Shape& sizes) {
  const std::size_t lead = out_index.size() - sizes.size();
  std::vector<std::int64_t> index(sizes.size());
  for (std::size_t d = 0; d < sizes.size(); ++d) index[d] = sizes[d] == 1 ? 0 : out_index[lead + d];
  return ravel(index, sizes);
}

template <typename F>
void expect_throw_with(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "expected an exception";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const auto& fragment : fragments) EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }
}

}  // namespace sublet::testing
