// Element-wise kernels on the GPU against the CPU kernels, on strided, transposed and broadcast
// (stride-0) operands. Tolerances: float32 1e-6 relative (the device may fuse x + a*y into one
// FMA and its expf/logf/powf/tanhf are within 2 ulp), float64 1e-14, int64 exact.
#include <gtest/gtest.h>

#include "cuda_test_support.h"
#include "memory/errors.h"
#include "ops/elementwise.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

template <typename T>
double rtol_for() {
  if constexpr (std::is_same_v<T, float>) return 1e-6;
  if constexpr (std::is_same_v<T, double>) return 1e-14;
  return 0.0;
}

template <typename T>
std::vector<T> values_for(std::size_t count, std::uint64_t seed, double low, double high) {
  if constexpr (std::is_integral_v<T>) {
    std::vector<T> v(count);
    std::mt19937_64 engine(seed);
    for (auto& x : v) x = static_cast<T>(static_cast<std::int64_t>(engine() % 2001) - 1000);
    for (auto& x : v) x = x == 0 ? 7 : x;  // DivScalar/Div by these must not hit 0
    return v;
  } else {
    return random_values<T>(static_cast<std::int64_t>(count), seed, low, high);
  }
}

// out[4, 5] (row-major) = op(in viewed transposed: in is stored [5, 4]).
template <typename T>
void check_unary(UnaryOp op, UnaryParams params, double low, double high, const char* name) {
  const Shape sizes{4, 5};
  const auto input = values_for<T>(20, 11, low, high);
  std::vector<T> cpu_out(20);
  unary(Context::for_device(Device::cpu()), op, DTypeOf<T>::value, sizes, {cpu_out.data(), {5, 1}},
        {input.data(), {1, 4}}, params);
  DeviceBuffer<T> in(input), out(20);
  unary(gpu_context(), op, DTypeOf<T>::value, sizes, {out.get(), {5, 1}}, {in.get(), {1, 4}}, params);
  expect_close(out.download(), cpu_out, rtol_for<T>(), 0.0, std::string(name) + " " + dtype_name(DTypeOf<T>::value));
}

}  // namespace

TEST(CudaElementwise, UnaryOpsMatchCpuOnTransposedInput) {
  if (!sublet::memory::cuda_available()) GTEST_SKIP() << "no CUDA device: unary kernels against the CPU";
  const UnaryParams none{}, scalar{0.75, 0}, range{-0.3, 0.4}, square{2.0, 0}, cube{3.0, 0};
  struct Case { UnaryOp op; UnaryParams params; double low, high; const char* name; };
  const Case cases[] = {
      {UnaryOp::Neg, none, -2, 2, "neg"},          {UnaryOp::Relu, none, -2, 2, "relu"},
      {UnaryOp::AddScalar, scalar, -2, 2, "add"},  {UnaryOp::MulScalar, scalar, -2, 2, "mul"},
      {UnaryOp::DivScalar, scalar, -2, 2, "div"},  {UnaryOp::Clamp, range, -1, 1, "clamp"},
      {UnaryOp::Positive, none, -2, 2, "positive"}, {UnaryOp::InRange, range, -1, 1, "in_range"},
      {UnaryOp::Exp, none, -3, 3, "exp"},          {UnaryOp::Log, none, 0.1, 4, "log"},
      {UnaryOp::Sqrt, none, 0.1, 4, "sqrt"},       {UnaryOp::Pow, square, -2, 2, "pow2"},
      {UnaryOp::Pow, cube, 0.1, 2, "pow3"},        {UnaryOp::Sigmoid, none, -4, 4, "sigmoid"},
      {UnaryOp::Tanh, none, -3, 3, "tanh"},
  };
  for (const Case& c : cases) {
    check_unary<float>(c.op, c.params, c.low, c.high, c.name);
    check_unary<double>(c.op, c.params, c.low, c.high, c.name);
    if (!unary_needs_floating(c.op)) check_unary<std::int64_t>(c.op, {3, 9}, 0, 0, c.name);
  }
}

TEST(CudaElementwise, FloatOnlyUnaryOpRefusesInt64) {
  if (!sublet::memory::cuda_available()) GTEST_SKIP() << "no CUDA device: dtype check of the CUDA unary kernel";
  DeviceBuffer<std::int64_t> in(std::vector<std::int64_t>{1, 2, 3}), out(3);
  EXPECT_THROW(unary(gpu_context(), UnaryOp::Exp, DType::Int64, {3}, {out.get(), {1}}, {in.get(), {1}}),
               DTypeError);
}

template <typename T>
void check_binary_broadcast() {
  // out[3, 4, 5] = a[3, 4, 5] (op) b[4, 1] broadcast over dims 0 and 2 (strides 0).
  const Shape sizes{3, 4, 5};
  const auto a_values = values_for<T>(60, 21, -2, 2);
  auto b_values = values_for<T>(4, 22, 0.5, 2);
  const BinaryOp ops[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Maximum,
                          BinaryOp::Minimum};
  DeviceBuffer<T> a(a_values), b(b_values), out(60);
  for (BinaryOp op : ops) {
    for (double alpha : {1.0, -2.5}) {
      std::vector<T> cpu_out(60);
      binary(Context::for_device(Device::cpu()), op, DTypeOf<T>::value, sizes, {cpu_out.data(), {20, 5, 1}},
             {a_values.data(), {20, 5, 1}}, {b_values.data(), {0, 1, 0}}, alpha);
      binary(gpu_context(), op, DTypeOf<T>::value, sizes, {out.get(), {20, 5, 1}}, {a.get(), {20, 5, 1}},
             {b.get(), {0, 1, 0}}, alpha);
      expect_close(out.download(), cpu_out, 2 * rtol_for<T>(), 0.0,
                   "binary op " + std::to_string(static_cast<int>(op)) + " alpha " + std::to_string(alpha));
    }
  }
}

TEST(CudaElementwise, BinaryOpsMatchCpuWithBroadcast) {
  if (!sublet::memory::cuda_available()) GTEST_SKIP() << "no CUDA device: binary kernels with stride-0 operands";
  check_binary_broadcast<float>();
  check_binary_broadcast<double>();
  check_binary_broadcast<std::int64_t>();
}

TEST(CudaElementwise, InPlaceBinaryAndTernaryMatchCpu) {
  if (!sublet::memory::cuda_available()) GTEST_SKIP() << "no CUDA device: in-place binary and addcmul/addcdiv";
  const Shape sizes{6, 7};
  const auto x = random_values<float>(42, 31), y = random_values<float>(42, 32), z = random_values<float>(42, 33, 0.5, 2);
  for (TernaryOp op : {TernaryOp::AddCMul, TernaryOp::AddCDiv}) {
    std::vector<float> cpu_out = x;  // out aliases a, as Adam's update does
    ternary(Context::for_device(Device::cpu()), op, DType::Float32, sizes, {cpu_out.data(), {7, 1}},
            {cpu_out.data(), {7, 1}}, {y.data(), {7, 1}}, {z.data(), {1, 6}}, -0.3);
    DeviceBuffer<float> a(x), b(y), c(z);
    ternary(gpu_context(), op, DType::Float32, sizes, {a.get(), {7, 1}}, {a.get(), {7, 1}}, {b.get(), {7, 1}},
            {c.get(), {1, 6}}, -0.3);
    expect_close(a.download(), cpu_out, 1e-6, 1e-7, op == TernaryOp::AddCMul ? "addcmul" : "addcdiv");
  }
  // A large contiguous in-place add covers the unit-stride fast path and several grid sweeps.
  const std::int64_t n = (1 << 20) + 3;
  const auto big_a = random_values<float>(n, 34), big_b = random_values<float>(n, 35);
  std::vector<float> cpu_out = big_a;
  binary(Context::for_device(Device::cpu()), BinaryOp::Add, DType::Float32, {n}, {cpu_out.data(), {1}},
         {cpu_out.data(), {1}}, {big_b.data(), {1}}, 0.5);
  DeviceBuffer<float> a(big_a), b(big_b);
  binary(gpu_context(), BinaryOp::Add, DType::Float32, {n}, {a.get(), {1}}, {a.get(), {1}}, {b.get(), {1}}, 0.5);
  expect_close(a.download(), cpu_out, 1e-6, 1e-7, "large in-place add");
}
