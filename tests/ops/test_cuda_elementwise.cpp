// Element-wise kernels on the GPU against the CPU kernels, on strided, transposed and broadcast
// (stride-0) operands. Tolerances: float32 1e-6 relative (the device may fuse x + a*y into one
// FMA and its expf/logf/powf/tanhf are within 2 ulp), float64 1e-14, int64 exact.
#include <gtest/gtest.h>

#include <array>
#include <limits>
#include <random>

#include "cuda_test_support.h"
#include "core/errors.h"
#include "ops/cuda/elementwise_plan.h"
#include "ops/elementwise.h"
#include "tests/gpu_skip.h"

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
  SUBLET_SKIP_WITHOUT_GPU("unary kernels against the CPU");
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
  SUBLET_SKIP_WITHOUT_GPU("dtype check of the CUDA unary kernel");
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
  SUBLET_SKIP_WITHOUT_GPU("binary kernels with stride-0 operands");
  check_binary_broadcast<float>();
  check_binary_broadcast<double>();
  check_binary_broadcast<std::int64_t>();
}

TEST(CudaElementwise, InPlaceBinaryAndTernaryMatchCpu) {
  SUBLET_SKIP_WITHOUT_GPU("in-place binary and addcmul/addcdiv");
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

// ---- dense (vectorised) kernel and its fallbacks ---------------------------------------------
// The GPU picks the dense kernel (16-byte vector loads, no index arithmetic, a scalar tail) when
// every operand is dense in the output's layout or one broadcast element, and every dense
// operand is 16-byte aligned; everything else takes the strided kernel (ops/cuda/
// elementwise_plan.h). Each case below first asserts which of the two it exercises, then
// compares the GPU with the CPU kernel on the same layout. Tolerances as above, plus an
// absolute 1e-6 (float) / 1e-14 (double) for x + alpha * y with alpha = -2.5, where the device's
// FMA and the CPU's rounded product differ by half an ulp of alpha * y, which is not small
// relative to a result near 0.

namespace {

template <typename T>
double atol_for() {
  if constexpr (std::is_same_v<T, float>) return 1e-6;
  if constexpr (std::is_same_v<T, double>) return 1e-14;
  return 0.0;
}

// One operand: the strides over the op's shape, how many elements of storage they span, and
// how many elements its first one sits after the 16-byte aligned start of the device buffer
// (1 = a view with an offset, as x[1:]).
struct Layout {
  Shape strides;
  std::size_t span = 0;
  std::size_t shift = 0;
};

Layout contiguous(const Shape& sizes, std::size_t shift = 0) {
  Shape strides(sizes.size());
  std::int64_t stride = 1;
  for (std::size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= sizes[d];
  }
  return {strides, static_cast<std::size_t>(stride), shift};
}

Layout broadcast_scalar(const Shape& sizes, std::size_t shift = 0) { return {Shape(sizes.size(), 0), 1, shift}; }

template <typename T>
std::vector<T> with_shift(const std::vector<T>& values, std::size_t shift) {
  std::vector<T> out(shift, T(77));
  out.insert(out.end(), values.begin(), values.end());
  return out;
}

template <typename T>
std::vector<T> without_shift(std::vector<T> values, std::size_t shift) {
  values.erase(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(shift));
  return values;
}

// The kernel a layout should take, asserted before the comparison so that a case cannot drift
// to the other path unnoticed.
template <int N>
bool takes_dense_kernel(const Shape& sizes, const std::array<const Layout*, N>& layouts, std::size_t element_size) {
  std::array<const Shape*, N> strides;
  std::array<const void*, N> addresses;
  alignas(16) static const char base[16] = {};
  for (int k = 0; k < N; ++k) {
    strides[k] = &layouts[k]->strides;
    addresses[k] = base + layouts[k]->shift * element_size;  // the device buffers start 512-byte aligned
  }
  return cuda::plan_dense<N>(sizes, strides, addresses, element_size).dense;
}

// Operands for a binary op: values that exercise it (signs both ways for ReluBackward, repeats
// for Equal, divisors away from 0).
template <typename T>
std::vector<T> binary_values(BinaryOp op, std::size_t count, std::uint64_t seed, bool second) {
  if (op == BinaryOp::Equal) {
    std::mt19937_64 engine(seed);
    std::vector<T> v(count);
    for (auto& x : v) x = static_cast<T>(engine() % 4);
    return v;
  }
  if (second && op == BinaryOp::ReluBackward) {
    auto v = values_for<T>(count, seed, -2, 2);
    for (std::size_t i = 0; i < v.size(); i += 5) v[i] = T(0);  // relu's output is exactly 0 where it clipped
    return v;
  }
  return second ? values_for<T>(count, seed, 0.5, 2) : values_for<T>(count, seed, -2, 2);
}

const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::Maximum: return "maximum";
    case BinaryOp::Minimum: return "minimum";
    case BinaryOp::Equal: return "equal";
    case BinaryOp::ReluBackward: return "relu_backward";
  }
  return "?";
}

constexpr BinaryOp kAllBinaryOps[] = {BinaryOp::Add,     BinaryOp::Sub,     BinaryOp::Mul,   BinaryOp::Div,
                                      BinaryOp::Maximum, BinaryOp::Minimum, BinaryOp::Equal, BinaryOp::ReluBackward};

template <typename T>
void compare_binary(BinaryOp op, double alpha, const Shape& sizes, const Layout& out, const Layout& a,
                    const Layout& b, bool expect_dense, const std::string& what) {
  const std::string label = what + " " + binary_name(op) + " alpha " + std::to_string(alpha) + " " +
                            dtype_name(DTypeOf<T>::value);
  ASSERT_EQ((takes_dense_kernel<3>(sizes, {&out, &a, &b}, sizeof(T))), expect_dense) << label;
  const auto a_values = binary_values<T>(op, a.span, 41, false), b_values = binary_values<T>(op, b.span, 42, true);
  std::vector<T> cpu_out(out.span, T(-5));  // elements the op does not cover keep this value on both sides
  binary(Context::for_device(Device::cpu()), op, DTypeOf<T>::value, sizes, {cpu_out.data(), out.strides},
         {a_values.data(), a.strides}, {b_values.data(), b.strides}, alpha);
  DeviceBuffer<T> d_a(with_shift(a_values, a.shift)), d_b(with_shift(b_values, b.shift));
  DeviceBuffer<T> d_out(with_shift(std::vector<T>(out.span, T(-5)), out.shift));
  binary(gpu_context(), op, DTypeOf<T>::value, sizes, {d_out.get() + out.shift, out.strides},
         {d_a.get() + a.shift, a.strides}, {d_b.get() + b.shift, b.strides}, alpha);
  expect_close(without_shift(d_out.download(), out.shift), cpu_out, 2 * rtol_for<T>(), atol_for<T>(), label);
}

template <typename T>
void compare_all_binary(const Shape& sizes, const Layout& out, const Layout& a, const Layout& b, bool expect_dense,
                        const std::string& what) {
  for (BinaryOp op : kAllBinaryOps) {
    for (double alpha : {1.0, -2.5}) {
      if (alpha != 1.0 && op != BinaryOp::Add && op != BinaryOp::Sub) continue;  // alpha only scales add/sub
      compare_binary<T>(op, alpha, sizes, out, a, b, expect_dense, what);
    }
  }
}

struct UnaryCase {
  UnaryOp op;
  UnaryParams params;
  double low, high;
  const char* name;
};

const UnaryCase kUnaryCases[] = {
    {UnaryOp::Neg, {}, -2, 2, "neg"},
    {UnaryOp::Relu, {}, -2, 2, "relu"},
    {UnaryOp::AddScalar, {0.75, 0}, -2, 2, "add"},
    {UnaryOp::MulScalar, {0.75, 0}, -2, 2, "mul"},
    {UnaryOp::DivScalar, {0.75, 0}, -2, 2, "div"},
    {UnaryOp::Clamp, {-0.3, 0.4}, -1, 1, "clamp"},
    {UnaryOp::Positive, {}, -2, 2, "positive"},
    {UnaryOp::InRange, {-0.3, 0.4}, -1, 1, "in_range"},
    {UnaryOp::Exp, {}, -3, 3, "exp"},
    {UnaryOp::Log, {}, 0.1, 4, "log"},
    {UnaryOp::Sqrt, {}, 0.1, 4, "sqrt"},
    {UnaryOp::Pow, {2.0, 0}, -2, 2, "pow2"},
    {UnaryOp::Pow, {3.0, 0}, 0.1, 2, "pow3"},
    {UnaryOp::Sigmoid, {}, -4, 4, "sigmoid"},
    {UnaryOp::Tanh, {}, -3, 3, "tanh"},
};

template <typename T>
void compare_unary(const UnaryCase& c, const Shape& sizes, const Layout& out, const Layout& in, bool expect_dense,
                   const std::string& what) {
  const std::string label = what + " " + c.name + " " + dtype_name(DTypeOf<T>::value);
  ASSERT_EQ((takes_dense_kernel<2>(sizes, {&out, &in}, sizeof(T))), expect_dense) << label;
  // Integers: the CPU test's parameters (3, 9), as in UnaryOpsMatchCpuOnTransposedInput.
  const UnaryParams params = std::is_integral_v<T> ? UnaryParams{3, 9} : c.params;
  const auto values = values_for<T>(in.span, 43, c.low, c.high);
  std::vector<T> cpu_out(out.span, T(-5));
  unary(Context::for_device(Device::cpu()), c.op, DTypeOf<T>::value, sizes, {cpu_out.data(), out.strides},
        {values.data(), in.strides}, params);
  DeviceBuffer<T> d_in(with_shift(values, in.shift));
  DeviceBuffer<T> d_out(with_shift(std::vector<T>(out.span, T(-5)), out.shift));
  unary(gpu_context(), c.op, DTypeOf<T>::value, sizes, {d_out.get() + out.shift, out.strides},
        {d_in.get() + in.shift, in.strides}, params);
  expect_close(without_shift(d_out.download(), out.shift), cpu_out, rtol_for<T>(), atol_for<T>(), label);
}

template <typename T>
void compare_all_unary(const Shape& sizes, const Layout& out, const Layout& in, bool expect_dense,
                       const std::string& what) {
  for (const UnaryCase& c : kUnaryCases) {
    if (std::is_integral_v<T> && unary_needs_floating(c.op)) continue;
    compare_unary<T>(c, sizes, out, in, expect_dense, what);
  }
}

template <typename T>
void compare_ternary(TernaryOp op, const Shape& sizes, const Layout& out, const Layout& a, const Layout& b,
                     const Layout& c, bool expect_dense, const std::string& what) {
  const std::string label = what + (op == TernaryOp::AddCMul ? " addcmul " : " addcdiv ") + dtype_name(DTypeOf<T>::value);
  ASSERT_EQ((takes_dense_kernel<4>(sizes, {&out, &a, &b, &c}, sizeof(T))), expect_dense) << label;
  const auto a_values = values_for<T>(a.span, 44, -2, 2), b_values = values_for<T>(b.span, 45, -2, 2);
  const auto c_values = values_for<T>(c.span, 46, 0.5, 2);
  std::vector<T> cpu_out(out.span, T(-5));
  ternary(Context::for_device(Device::cpu()), op, DTypeOf<T>::value, sizes, {cpu_out.data(), out.strides},
          {a_values.data(), a.strides}, {b_values.data(), b.strides}, {c_values.data(), c.strides}, -0.3);
  DeviceBuffer<T> d_a(with_shift(a_values, a.shift)), d_b(with_shift(b_values, b.shift));
  DeviceBuffer<T> d_c(with_shift(c_values, c.shift));
  DeviceBuffer<T> d_out(with_shift(std::vector<T>(out.span, T(-5)), out.shift));
  ternary(gpu_context(), op, DTypeOf<T>::value, sizes, {d_out.get() + out.shift, out.strides},
          {d_a.get() + a.shift, a.strides}, {d_b.get() + b.shift, b.strides}, {d_c.get() + c.shift, c.strides}, -0.3);
  expect_close(without_shift(d_out.download(), out.shift), cpu_out, 2 * rtol_for<T>(), atol_for<T>(), label);
}

// Element counts around the vector width: below one vector, exact multiples, and each
// remainder 1, 2, 3 of numel % 4 (float) and 1 of numel % 2 (double, int64).
const std::int64_t kOddSizes[] = {1, 3, 4, 1023, 4096, 4097, 4098, (1 << 20) + 3};

}  // namespace

TEST(CudaElementwise, DenseKernelMatchesCpuOnOddSizes) {
  SUBLET_SKIP_WITHOUT_GPU("dense kernel with its scalar tail");
  for (std::int64_t n : kOddSizes) {
    const Shape sizes{n};
    const Layout dense = contiguous(sizes);
    const std::string what = "numel " + std::to_string(n);
    compare_all_unary<float>(sizes, dense, dense, true, what);
    compare_all_unary<double>(sizes, dense, dense, true, what);
    compare_all_unary<std::int64_t>(sizes, dense, dense, true, what);
    compare_all_binary<float>(sizes, dense, dense, dense, true, what);
    compare_all_binary<double>(sizes, dense, dense, dense, true, what);
    compare_all_binary<std::int64_t>(sizes, dense, dense, dense, true, what);
    for (TernaryOp op : {TernaryOp::AddCMul, TernaryOp::AddCDiv}) {
      compare_ternary<float>(op, sizes, dense, dense, dense, dense, true, what);
      compare_ternary<double>(op, sizes, dense, dense, dense, dense, true, what);
    }
  }
  // A 4-D NCHW tensor, contiguous: one dense run.
  const Shape nchw{2, 3, 7, 5};
  compare_all_binary<float>(nchw, contiguous(nchw), contiguous(nchw), contiguous(nchw), true, "2x3x7x5");
  compare_all_unary<float>(nchw, contiguous(nchw), contiguous(nchw), true, "2x3x7x5");
}

TEST(CudaElementwise, MisalignedViewsTakeTheStridedKernelAndMatchCpu) {
  SUBLET_SKIP_WITHOUT_GPU("views whose base is off the 16-byte boundary");
  for (std::int64_t n : {std::int64_t{4097}, std::int64_t{1023}}) {
    const Shape sizes{n};
    const Layout aligned = contiguous(sizes), shifted = contiguous(sizes, 1), shifted3 = contiguous(sizes, 3);
    const std::string what = "numel " + std::to_string(n) + " ";
    compare_all_unary<float>(sizes, shifted, aligned, false, what + "output at +1");
    compare_all_unary<float>(sizes, aligned, shifted3, false, what + "input at +3");
    compare_all_unary<double>(sizes, aligned, shifted, false, what + "input at +1");
    compare_all_binary<float>(sizes, shifted, aligned, aligned, false, what + "output at +1");
    compare_all_binary<float>(sizes, aligned, shifted3, aligned, false, what + "a at +3");
    compare_all_binary<float>(sizes, aligned, aligned, shifted, false, what + "b at +1");
    compare_all_binary<double>(sizes, aligned, aligned, shifted, false, what + "b at +1");
    compare_all_binary<std::int64_t>(sizes, shifted, shifted, shifted, false, what + "all at +1");
    compare_ternary<float>(TernaryOp::AddCMul, sizes, aligned, aligned, shifted, aligned, false, what + "b at +1");
    // Four floats in is 16 bytes in: aligned again, the dense kernel.
    const Layout shifted4 = contiguous(sizes, 4);
    compare_all_binary<float>(sizes, shifted4, aligned, shifted4, true, what + "output and b at +4");
  }
}

TEST(CudaElementwise, SharedTransposedLayoutTakesTheDenseKernel) {
  SUBLET_SKIP_WITHOUT_GPU("dense kernel on a permuted layout");
  // [33, 65] stored column-major by every operand: memory order differs from element order, but
  // is the same for all of them, so the op runs over memory.
  const Shape sizes{33, 65};
  const Layout transposed{{1, 33}, 33 * 65, 0};
  compare_all_unary<float>(sizes, transposed, transposed, true, "transposed");
  compare_all_unary<std::int64_t>(sizes, transposed, transposed, true, "transposed");
  compare_all_binary<float>(sizes, transposed, transposed, transposed, true, "transposed");
  compare_all_binary<double>(sizes, transposed, transposed, transposed, true, "transposed");
  // One operand in the other order: element i is elsewhere in memory, the strided kernel.
  compare_all_binary<float>(sizes, contiguous(sizes), transposed, contiguous(sizes), false, "a transposed only");
  compare_all_unary<float>(sizes, transposed, contiguous(sizes), false, "output transposed only");
}

TEST(CudaElementwise, ScalarOperandOnEitherSideTakesTheDenseKernel) {
  SUBLET_SKIP_WITHOUT_GPU("one-element broadcast operand");
  const Shape sizes{33, 65};  // 2145 elements: a tail of 1 (float) and of 1 (double, int64)
  const Layout dense = contiguous(sizes);
  // A scalar is read as one element: its address need not be aligned.
  for (std::size_t shift : {std::size_t{0}, std::size_t{1}}) {
    const Layout scalar = broadcast_scalar(sizes, shift);
    const std::string what = "scalar at +" + std::to_string(shift);
    compare_all_binary<float>(sizes, dense, dense, scalar, true, what + " on the right");
    compare_all_binary<float>(sizes, dense, scalar, dense, true, what + " on the left");
    compare_all_binary<double>(sizes, dense, scalar, dense, true, what + " on the left");
    compare_all_binary<std::int64_t>(sizes, dense, dense, scalar, true, what + " on the right");
    compare_ternary<float>(TernaryOp::AddCDiv, sizes, dense, dense, scalar, dense, true, what + " as b");
    compare_ternary<double>(TernaryOp::AddCMul, sizes, dense, dense, dense, scalar, true, what + " as c");
  }
}

TEST(CudaElementwise, RowAndChannelBroadcastTakeTheStridedKernel) {
  SUBLET_SKIP_WITHOUT_GPU("broadcast rows and channels");
  const Shape sizes{2, 3, 7, 5};
  const Layout dense = contiguous(sizes);
  const Layout per_channel{{0, 1, 0, 0}, 3, 0};      // a [3, 1, 1] bias over NCHW
  const Layout per_column{{0, 0, 0, 1}, 5, 0};       // a [5] bias over the last dimension
  compare_all_binary<float>(sizes, dense, dense, per_channel, false, "per-channel b");
  compare_all_binary<float>(sizes, dense, per_column, dense, false, "per-column a");
  compare_all_binary<std::int64_t>(sizes, dense, dense, per_channel, false, "per-channel b");
}

namespace {

template <int N>
bool takes_row_kernel(const Shape& sizes, const std::array<const Layout*, N>& layouts, std::size_t element_size) {
  std::array<const Shape*, N> strides;
  std::array<const void*, N> addresses;
  alignas(16) static const char base[16] = {};
  for (int k = 0; k < N; ++k) {
    strides[k] = &layouts[k]->strides;
    addresses[k] = base + layouts[k]->shift * element_size;
  }
  return cuda::plan_rows<N>(sizes, strides, addresses, element_size).applies;
}

// The row kernel is asserted before each comparison (the dense one is not taken: expect_dense
// false), so that a case cannot drift to the strided kernel unnoticed.
template <typename T>
void compare_rows(const Shape& sizes, const Layout& out, const Layout& a, const Layout& b, bool expect_rows,
                  const std::string& what) {
  ASSERT_EQ((takes_row_kernel<3>(sizes, {&out, &a, &b}, sizeof(T))), expect_rows) << what;
  compare_all_binary<T>(sizes, out, a, b, false, what);
}

template <typename T>
void check_row_layouts() {
  // 37 rows of 64 columns: whole 16-byte vectors for every element size.
  const Shape sizes{37, 64};
  const Layout dense = contiguous(sizes);
  const Layout bias{{0, 1}, 64, 0};        // a [64] vector broadcast over the rows
  const Layout per_row{{1, 0}, 37, 0};     // one value per row ([37, 1])
  const Layout per_row_off{{1, 0}, 38, 1};  // the same one element in: read singly, no alignment
  const Layout wide_rows{{80, 1}, 37 * 80, 0};  // rows of 64 in rows of 80: a narrowed view
  compare_rows<T>(sizes, dense, dense, bias, true, "bias on the right");
  compare_rows<T>(sizes, dense, bias, dense, true, "bias on the left");
  compare_rows<T>(sizes, dense, dense, per_row, true, "value per row");
  compare_rows<T>(sizes, dense, per_row_off, bias, true, "value per row off the boundary, bias");
  compare_rows<T>(sizes, wide_rows, wide_rows, dense, true, "narrowed output and a");
  compare_rows<T>(sizes, dense, dense, Layout{{0, 1}, 65, 1}, false, "bias off the boundary");
  // 66 columns are whole 16-byte vectors of the 8-byte types only; 7 of none.
  const Shape odd{37, 66};
  compare_rows<T>(odd, contiguous(odd), contiguous(odd), Layout{{0, 1}, 66, 0}, sizeof(T) == 8, "66 columns");
  const Shape tail{37, 7};
  compare_rows<T>(tail, contiguous(tail), contiguous(tail), Layout{{0, 1}, 7, 0}, false, "7 columns");
}

}  // namespace

TEST(CudaElementwise, RowBroadcastAndWideRowsTakeTheRowKernelAndMatchCpu) {
  SUBLET_SKIP_WITHOUT_GPU("the row kernel: bias rows, values per row, narrowed rows");
  check_row_layouts<float>();
  check_row_layouts<double>();
  check_row_layouts<std::int64_t>();
}

TEST(CudaElementwise, LargeTensorsBeyond2To24Elements) {
  SUBLET_SKIP_WITHOUT_GPU("element-wise kernels on > 2^24 elements");
  const Shape flat{(std::int64_t{1} << 24) + 5};
  const Shape nchw{8, 130, 129, 127};  // 17,038,320 elements
  for (const Shape& sizes : {flat, nchw}) {
    const Layout dense = contiguous(sizes);
    const std::string what = std::to_string(shape_numel(sizes)) + " elements";
    compare_unary<float>(kUnaryCases[1], sizes, dense, dense, true, what);  // relu
    compare_unary<float>(kUnaryCases[3], sizes, dense, dense, true, what);  // mul by a scalar
    compare_binary<float>(BinaryOp::Add, -2.5, sizes, dense, dense, dense, true, what);
    compare_binary<float>(BinaryOp::ReluBackward, 1.0, sizes, dense, dense, dense, true, what);
    compare_binary<float>(BinaryOp::Mul, 1.0, sizes, dense, dense, broadcast_scalar(sizes), true, what);
    compare_ternary<float>(TernaryOp::AddCMul, sizes, dense, dense, dense, dense, true, what);
    // The same sizes through the strided kernel (output one element into its buffer).
    compare_binary<float>(BinaryOp::Add, -2.5, sizes, contiguous(sizes, 1), dense, dense, false, what);
  }
  // In place (out aliases a), as Tensor::add_ and the optimizers' updates do.
  const std::int64_t n = shape_numel(nchw);
  const auto a_values = random_values<float>(n, 47), b_values = random_values<float>(n, 48);
  std::vector<float> cpu_out = a_values;
  binary(Context::for_device(Device::cpu()), BinaryOp::Add, DType::Float32, nchw, {cpu_out.data(), contiguous(nchw).strides},
         {cpu_out.data(), contiguous(nchw).strides}, {b_values.data(), contiguous(nchw).strides}, 0.5);
  DeviceBuffer<float> a(a_values), b(b_values);
  binary(gpu_context(), BinaryOp::Add, DType::Float32, nchw, {a.get(), contiguous(nchw).strides},
         {a.get(), contiguous(nchw).strides}, {b.get(), contiguous(nchw).strides}, 0.5);
  expect_close(a.download(), cpu_out, 1e-6, 1e-7, "large in-place add");
}

TEST(CudaElementwise, ReluBackwardPassesTheGradientOnlyWhereTheOutputIsPositive) {
  SUBLET_SKIP_WITHOUT_GPU("relu backward");
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // g is inf or NaN where y <= 0: the result there is 0, not NaN (unlike g * (y > 0)).
  const std::vector<float> g{1.5f, -2.f, inf, nan, 3.f, -inf, 0.25f};
  const std::vector<float> y{0.5f, 2.f, 0.f, -1.f, 1e-30f, -0.f, -3.f};
  const std::vector<float> want{1.5f, -2.f, 0.f, 0.f, 3.f, 0.f, 0.f};
  const Shape sizes{7};
  std::vector<float> cpu_out(7);
  binary(Context::for_device(Device::cpu()), BinaryOp::ReluBackward, DType::Float32, sizes, {cpu_out.data(), {1}},
         {g.data(), {1}}, {y.data(), {1}});
  expect_equal(cpu_out, want, "cpu relu_backward");
  for (std::size_t shift : {std::size_t{0}, std::size_t{1}}) {  // dense kernel, then strided kernel
    DeviceBuffer<float> d_g(with_shift(g, shift)), d_y(with_shift(y, shift)), d_out(7 + shift);
    binary(gpu_context(), BinaryOp::ReluBackward, DType::Float32, sizes, {d_out.get() + shift, {1}},
           {d_g.get() + shift, {1}}, {d_y.get() + shift, {1}});
    expect_equal(without_shift(d_out.download(), shift), want, "gpu relu_backward, operands at +" + std::to_string(shift));
  }
}

TEST(CudaElementwise, ZeroDimInt64IncrementInPlace) {
  SUBLET_SKIP_WITHOUT_GPU("num_batches_tracked += 1");
  // BatchNorm2d's num_batches_tracked.add_(1): a 0-d int64 tensor updated in place.
  DeviceBuffer<std::int64_t> counter(std::vector<std::int64_t>{41});
  for (int step = 0; step < 2; ++step) {
    unary(gpu_context(), UnaryOp::AddScalar, DType::Int64, {}, {counter.get(), {}}, {counter.get(), {}}, {1.0});
  }
  EXPECT_EQ(counter.download(), std::vector<std::int64_t>{43});
}

TEST(CudaElementwise, InPlaceDenseUnaryAndTernaryMatchCpu) {
  SUBLET_SKIP_WITHOUT_GPU("in-place dense kernels");
  const std::int64_t n = 4099;
  const auto x = random_values<float>(n, 49), y = random_values<float>(n, 50), z = random_values<float>(n, 51, 0.5, 2);
  std::vector<float> cpu_out = x;
  unary(Context::for_device(Device::cpu()), UnaryOp::Relu, DType::Float32, {n}, {cpu_out.data(), {1}},
        {cpu_out.data(), {1}});
  ternary(Context::for_device(Device::cpu()), TernaryOp::AddCDiv, DType::Float32, {n}, {cpu_out.data(), {1}},
          {cpu_out.data(), {1}}, {y.data(), {1}}, {z.data(), {1}}, -0.3);
  DeviceBuffer<float> a(x), b(y), c(z);
  unary(gpu_context(), UnaryOp::Relu, DType::Float32, {n}, {a.get(), {1}}, {a.get(), {1}});
  ternary(gpu_context(), TernaryOp::AddCDiv, DType::Float32, {n}, {a.get(), {1}}, {a.get(), {1}}, {b.get(), {1}},
          {c.get(), {1}}, -0.3);
  expect_close(a.download(), cpu_out, 2e-6, 1e-7, "in-place relu then addcdiv");
}
