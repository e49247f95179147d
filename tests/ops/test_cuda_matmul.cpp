// cuBLAS matmul against the CPU (Eigen) kernel for every operand layout the runtime passes:
// row-major, transposed (column-major) views, and a matrix broadcast over the batch (stride 0).
// Tolerance: each output is a k-term dot product; float32 atol 1e-6 * k with rtol 1e-5,
// float64 1e-13 * k (both are full-precision FMA sums in different orders; no TF32).
#include <gtest/gtest.h>

#include "cuda_test_support.h"
#include "ops/matmul.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

template <typename T>
void check(const MatmulGeometry& g, std::size_t a_elements, std::size_t b_elements, const std::string& what) {
  const auto a_values = random_values<T>(static_cast<std::int64_t>(a_elements), 41);
  const auto b_values = random_values<T>(static_cast<std::int64_t>(b_elements), 42);
  const std::size_t out_elements = static_cast<std::size_t>(g.batch * g.m * g.n);
  std::vector<T> cpu_out(out_elements);
  matmul(Context::for_device(Device::cpu()), DTypeOf<T>::value, g, cpu_out.data(), a_values.data(), b_values.data());
  DeviceBuffer<T> a(a_values), b(b_values), out(out_elements);
  matmul(gpu_context(), DTypeOf<T>::value, g, out.get(), a.get(), b.get());
  const double unit = std::is_same_v<T, float> ? 1e-6 : 1e-13;
  expect_close(out.download(), cpu_out, std::is_same_v<T, float> ? 1e-5 : 1e-12, unit * g.k, what);
}

template <typename T>
void check_layouts() {
  const std::int64_t batch = 3, m = 17, k = 33, n = 9;
  const std::string type = dtype_name(DTypeOf<T>::value);
  // a [m, k] and b [k, n] row-major, batched.
  check<T>({batch, m, k, n, m * k, k, 1, k * n, n, 1}, batch * m * k, batch * k * n, type + " NN");
  // a stored [k, m] and read transposed; b stored [n, k] read transposed.
  check<T>({batch, m, k, n, m * k, 1, m, k * n, 1, k}, batch * m * k, batch * k * n, type + " TT");
  // b broadcast over the batch (batch stride 0), a transposed.
  check<T>({batch, m, k, n, m * k, 1, m, 0, n, 1}, batch * m * k, k * n, type + " T, broadcast b");
  // padded rows: a row stride larger than k (a column slice of a wider matrix).
  check<T>({1, m, k, n, 0, k + 5, 1, 0, n, 1}, m * (k + 5), k * n, type + " padded rows");
  // vector shapes: m = 1 and n = 1.
  check<T>({2, 1, k, 1, k, k, 1, k, 1, 1}, 2 * k, 2 * k, type + " dot products");
}

}  // namespace

TEST(CudaMatmul, AllLayoutsMatchCpu) {
  SUBLET_SKIP_WITHOUT_GPU("cuBLAS matmul against the CPU");
  check_layouts<float>();
  check_layouts<double>();
}

TEST(CudaMatmul, EmptyInnerDimensionGivesZeros) {
  SUBLET_SKIP_WITHOUT_GPU("matmul with k = 0");
  DeviceBuffer<float> out(std::vector<float>(6, 5.0f)), a(1), b(1);
  matmul(gpu_context(), DType::Float32, {1, 2, 0, 3, 0, 0, 1, 0, 3, 1}, out.get(), a.get(), b.get());
  expect_equal(out.download(), std::vector<float>(6, 0.0f), "k = 0 product");
}
