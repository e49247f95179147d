// cuBLAS matmul in bfloat16 and float16 (ops/cuda/matmul_cuda.cpp: cublasGemmStridedBatchedEx,
// 16-bit A/B/C, CUBLAS_COMPUTE_32F) against the float32 CPU kernel on the same 16-bit-rounded
// inputs, for every operand layout MatmulGeometry describes: row-major, transposed
// (column-major) views, a matrix broadcast over the batch (stride 0), padded rows, vectors; odd
// sizes (no tensor-core-friendly alignment) and k = 4096.
// Tolerance per dtype (tests/ops/low_precision_gpu_support.h): bfloat16 rtol 2^-7 + 1e-2 of the
// largest |reference|, float16 rtol 2^-10 + 2e-3 of it (the one rounding of the output to 16
// bits; 16-bit partial sums over k = 4096 would be off by several percent of it). NaN fails.
// Sums of 4096 ones must be exactly 4096: a 16-bit accumulator stops at 256 (bfloat16) or 2048
// (float16).
#include <gtest/gtest.h>

#include "low_precision_gpu_support.h"
#include "ops/matmul.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

std::string describe(DType dtype, const MatmulGeometry& g, const std::string& layout) {
  return std::string("matmul ") + dtype_name(dtype) + " " + layout + " (batch " + std::to_string(g.batch) + ", m " +
         std::to_string(g.m) + ", k " + std::to_string(g.k) + ", n " + std::to_string(g.n) + ")";
}

template <typename T>
void check(const MatmulGeometry& g, std::size_t a_elements, std::size_t b_elements, const std::string& layout) {
  run_case(describe(DTypeOf<T>::value, g, layout), [&] {
    const auto a = rounded_values<T>(static_cast<std::int64_t>(a_elements), 51);
    const auto b = rounded_values<T>(static_cast<std::int64_t>(b_elements), 52);
    const std::size_t out_elements = static_cast<std::size_t>(g.batch * g.m * g.n);
    std::vector<float> reference(out_elements);
    matmul(Context::for_device(Device::cpu()), DType::Float32, g, reference.data(), a.exact.data(), b.exact.data());
    DeviceBuffer<T> d_a(a.typed), d_b(b.typed), d_out(out_elements);
    matmul(gpu_context(), DTypeOf<T>::value, g, d_out.get(), d_a.get(), d_b.get());
    expect_near_reference(d_out.download(), reference, tolerance_for<T>(reference, static_cast<double>(g.k)),
                          describe(DTypeOf<T>::value, g, layout));
  });
}

template <typename T>
void check_layouts(std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n) {
  // a [m, k] and b [k, n] row-major, batched.
  check<T>({batch, m, k, n, m * k, k, 1, k * n, n, 1}, batch * m * k, batch * k * n, "NN");
  // a stored [k, m] and read transposed; b stored [n, k] read transposed.
  check<T>({batch, m, k, n, m * k, 1, m, k * n, 1, k}, batch * m * k, batch * k * n, "TT");
  // a row-major, b transposed (linear's x @ W^T).
  check<T>({batch, m, k, n, m * k, k, 1, k * n, 1, k}, batch * m * k, batch * k * n, "NT");
  // b broadcast over the batch (batch stride 0), a transposed.
  check<T>({batch, m, k, n, m * k, 1, m, 0, n, 1}, batch * m * k, k * n, "T, broadcast b");
  // padded rows: a row stride larger than k (a column slice of a wider matrix).
  check<T>({1, m, k, n, 0, k + 5, 1, 0, n, 1}, m * (k + 5), k * n, "padded rows");
  // vector shapes: m = 1 and n = 1.
  check<T>({2, 1, k, 1, k, k, 1, k, 1, 1}, 2 * k, 2 * k, "dot products");
}

template <typename T>
void check_exact_long_sum() {
  const std::int64_t m = 8, k = 4096, n = 16;
  DeviceBuffer<T> a(std::vector<T>(m * k, T(1.0f))), b(std::vector<T>(k * n, T(1.0f))), out(m * n);
  const MatmulGeometry g{1, m, k, n, 0, k, 1, 0, n, 1};
  matmul(gpu_context(), DTypeOf<T>::value, g, out.get(), a.get(), b.get());
  expect_near_reference(out.download(), std::vector<float>(m * n, 4096.0f), Tolerance{0, 0},
                        describe(DTypeOf<T>::value, g, "NN, all ones (exact sum 4096)"));
}

}  // namespace

TEST(CudaHalfMatmul, BFloat16LayoutsMatchFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("bfloat16 cuBLAS matmul against the float32 CPU kernel");
  check_layouts<BFloat16>(3, 17, 33, 9);    // odd sizes
  check_layouts<BFloat16>(2, 64, 128, 32);  // tensor-core-aligned sizes
}

TEST(CudaHalfMatmul, Float16LayoutsMatchFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("float16 cuBLAS matmul against the float32 CPU kernel");
  check_layouts<Float16>(3, 17, 33, 9);
  check_layouts<Float16>(2, 64, 128, 32);
}

TEST(CudaHalfMatmul, LongSumsAccumulateInFloat32) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit matmul with k = 4096");
  check_layouts<BFloat16>(2, 33, 4096, 17);
  check_layouts<Float16>(2, 33, 4096, 17);
  check_exact_long_sum<BFloat16>();
  check_exact_long_sum<Float16>();
}

TEST(CudaHalfMatmul, EmptyInnerDimensionGivesZeros) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit matmul with k = 0");
  DeviceBuffer<BFloat16> out(std::vector<BFloat16>(6, BFloat16(5.0f))), a(1), b(1);
  matmul(gpu_context(), DType::BFloat16, {1, 2, 0, 3, 0, 0, 1, 0, 3, 1}, out.get(), a.get(), b.get());
  expect_near_reference(out.download(), std::vector<float>(6, 0.0f), Tolerance{0, 0}, "matmul bfloat16 k = 0");
}
