#pragma once
// Helpers shared by the GPU kernel tests: device buffers from the caching allocator (so the
// tests also exercise the allocator path every tensor takes), uploads/downloads through
// ops::copy_bytes, and element-wise comparisons that name the first mismatching elements.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "memory/current_stream.h"
#include "memory/registry.h"
#include "ops/context.h"
#include "ops/copy.h"
#include "nn_test_support.h"

namespace sublet::ops::testing {

inline Device gpu() { return Device::cuda(0); }
inline Context gpu_context() { return Context::for_device(gpu()); }

// The batch norm tests' tolerances (cuDNN accumulates the statistics in float, the CPU kernel in
// double): float32 rtol 1e-4, atol 1e-5; float64 rtol 1e-10, atol 1e-12.
template <typename T>
struct BatchNormTolerance {
  static constexpr double rtol = std::is_same_v<T, float> ? 1e-4 : 1e-10;
  static constexpr double atol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
};

// A block of device memory holding a copy of host values (or `count` uninitialised elements).
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    // On the current stream, like a tensor: kernels on a user stream use it in stream order.
    block_ = memory::allocator_for(gpu()).allocate(bytes(), memory::current_stream(gpu()),
                                                    memory::BlockCategory::Temporary);
  }
  explicit DeviceBuffer(const std::vector<T>& values) : DeviceBuffer(values.size()) { upload(values); }
  ~DeviceBuffer() { memory::allocator_for(gpu()).free(block_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return static_cast<T*>(block_->ptr); }
  std::size_t size() const { return count_; }
  void upload(const std::vector<T>& values) {
    copy_bytes(gpu(), block_->ptr, Device::cpu(), values.data(), values.size() * sizeof(T));
  }
  std::vector<T> download() const {
    std::vector<T> values(count_);
    copy_bytes(Device::cpu(), values.data(), gpu(), block_->ptr, bytes());
    return values;
  }

 private:
  std::size_t bytes() const { return count_ * sizeof(T); }
  std::size_t count_;
  memory::Block* block_ = nullptr;
};

template <typename T>
bool both_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(a) && std::isnan(b);
  return false;
}

// |gpu - cpu| <= atol + rtol * |cpu| for every element (NaN matches NaN).
template <typename T>
void expect_close(const std::vector<T>& gpu_values, const std::vector<T>& cpu_values, double rtol, double atol,
                  const std::string& what) {
  ASSERT_EQ(gpu_values.size(), cpu_values.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < cpu_values.size(); ++i) {
    const double g = static_cast<double>(gpu_values[i]), c = static_cast<double>(cpu_values[i]);
    if (both_nan(gpu_values[i], cpu_values[i])) continue;
    if (!(std::abs(g - c) <= atol + rtol * std::abs(c))) {
      if (bad < 5) ADD_FAILURE() << what << "[" << i << "]: gpu " << g << ", cpu " << c << " (|diff| " << std::abs(g - c) << ")";
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << cpu_values.size() << " elements outside rtol " << rtol
                     << ", atol " << atol;
}

// Bit-for-bit equality (NaN matches NaN), for kernels that reproduce the CPU's operation order.
template <typename T>
void expect_equal(const std::vector<T>& gpu_values, const std::vector<T>& cpu_values, const std::string& what) {
  expect_close(gpu_values, cpu_values, 0.0, 0.0, what);
}

}  // namespace sublet::ops::testing

