// Element-wise kernels on bfloat16 and float16 on the GPU (ops/cuda/elementwise.cu: load 16
// bits, compute in float32, store 16 bits) against the float32 CPU kernel on the same inputs.
// Tolerance per dtype (tests/ops/half_test_support.h): one rounding to the 16-bit type, at most
// 2^-8 of the value for bfloat16 and 2^-11 for float16 (half an ulp; 2^-134 and 2^-25 absolute
// below the normal range), plus 1e-6 relative for the float32 arithmetic (the device's
// expf/logf/powf/tanhf and FMA contraction; for x + a*y forms also 1e-6 of |x| + |a*y|, since
// a contracted FMA is off by a float32 rounding of the product, however much the sum cancels).
// A NaN passes only against a NaN, an infinity only as the host rounding of the reference.
// The inputs hold +-0, +-inf, NaN, subnormals and the largest finite values of the type.
// Dropout: the same mask as the float32 CPU kernel, kept values times the float32 scale.
// Layouts: dense (the vector kernel, 203 elements: 8 per access and a tail), transposed and
// offset views (the strided kernel), broadcast rows and scalars; and in-place add_ as gradient
// accumulation does it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/half.h"
#include "cuda_test_support.h"
#include "half_test_support.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

template <typename H>
double rtol() {
  return HalfTolerance<H>::rounding_rtol + kFloat32ComputeRtol;
}
template <typename H>
double atol() {
  return HalfTolerance<H>::rounding_atol;
}

// `count` inputs rounded to H: the type's special values first, then uniform in [low, high].
template <typename H>
std::vector<H> inputs(std::size_t count, std::uint64_t seed, double low, double high) {
  std::vector<float> v = special_values<H>();
  const std::vector<float> random = random_values<float>(static_cast<std::int64_t>(count), seed, low, high);
  for (std::size_t i = v.size(); i < count; ++i) v.push_back(random[i]);
  v.resize(count);
  // Shuffle so that the specials land in different vector lanes and in the tail.
  std::mt19937_64 engine(seed);
  std::shuffle(v.begin(), v.end(), engine);
  return to_half<H>(v);
}

// The allowance for x + a*y forms: 1e-6 of |x| + |a*y| where that is finite (where it is not,
// the reference is not finite either and only the host rounding matches).
std::vector<double> cancellation_allowance(const std::vector<float>& x, const std::vector<float>& ay) {
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double s = std::abs(static_cast<double>(x[i])) + std::abs(static_cast<double>(ay[i]));
    out[i] = std::isfinite(s) ? kFloat32ComputeRtol * s : 0.0;
  }
  return out;
}

struct Layout {
  const char* name;
  Shape sizes;
  Shape out_strides;
  Shape in_strides;
  std::int64_t in_offset;  // elements: a view off the 16-byte boundary
  std::size_t in_elements;
};

const Layout kLayouts[] = {
    {"dense", {203}, {1}, {1}, 0, 203},
    {"transposed", {7, 29}, {29, 1}, {1, 7}, 0, 203},
    {"offset view", {203}, {1}, {1}, 1, 204},
};

template <typename H>
void check_unary(UnaryOp op, UnaryParams params, double low, double high, const std::string& name) {
  for (const Layout& layout : kLayouts) {
    const std::string what = name + " " + dtype_name(DTypeOf<H>::value) + " " + layout.name;
    const std::vector<H> input = inputs<H>(layout.in_elements, 21, low, high);
    const std::vector<float> input_f = to_float(input);
    const std::int64_t n = shape_numel(layout.sizes);
    std::vector<float> reference(n);
    unary(Context::for_device(Device::cpu()), op, DType::Float32, layout.sizes, {reference.data(), layout.out_strides},
          {input_f.data() + layout.in_offset, layout.in_strides}, params);
    DeviceBuffer<H> in(input), out(n);
    unary(gpu_context(), op, DTypeOf<H>::value, layout.sizes, {out.get(), layout.out_strides},
          {in.get() + layout.in_offset, layout.in_strides}, params);
    expect_half_close(out.download(), reference, rtol<H>(), atol<H>(), what);
  }
}

template <typename H>
void check_unary_ops() {
  const bool f16 = std::is_same_v<H, Float16>;
  const double big = f16 ? 65504.0 : 3.0e38;  // up to the largest finite value
  const UnaryParams none{}, scalar{0.75, 0}, range{-0.3, 0.4}, square{2.0, 0}, cube{3.0, 0};
  struct Case {
    UnaryOp op;
    UnaryParams params;
    double low, high;
    const char* name;
  };
  const Case cases[] = {
      {UnaryOp::Neg, none, -2, 2, "neg"},
      {UnaryOp::Relu, none, -2, 2, "relu"},
      {UnaryOp::AddScalar, scalar, -2, 2, "add"},
      {UnaryOp::AddScalar, {f16 ? 64.0 : 1e36, 0}, big * 0.9, big, "add near overflow"},
      {UnaryOp::MulScalar, scalar, -2, 2, "mul"},
      {UnaryOp::MulScalar, {2.0, 0}, big * 0.3, big, "mul to overflow"},
      {UnaryOp::MulScalar, {1e-5, 0}, -1e-2, 1e-2, "mul to subnormals"},
      {UnaryOp::DivScalar, scalar, -2, 2, "div"},
      {UnaryOp::DivScalar, {3.0, 0}, -1e-4, 1e-4, "div to subnormals"},
      {UnaryOp::Clamp, range, -1, 1, "clamp"},
      {UnaryOp::Positive, none, -2, 2, "positive"},
      {UnaryOp::InRange, range, -1, 1, "in_range"},
      {UnaryOp::Exp, none, -3, 3, "exp"},
      {UnaryOp::Exp, none, f16 ? 8 : 80, f16 ? 12 : 90, "exp to overflow"},
      {UnaryOp::Log, none, 0.1, 4, "log"},  // log of the specials: -inf, NaN
      {UnaryOp::Sqrt, none, 0.1, 4, "sqrt"},
      {UnaryOp::Pow, square, -2, 2, "pow2"},
      {UnaryOp::Pow, square, f16 ? 200 : 1e18, f16 ? 300 : 2e19, "pow2 to overflow"},
      {UnaryOp::Pow, cube, 0.1, 2, "pow3"},
      {UnaryOp::Sigmoid, none, -4, 4, "sigmoid"},
      {UnaryOp::Tanh, none, -3, 3, "tanh"},
  };
  for (const Case& c : cases) check_unary<H>(c.op, c.params, c.low, c.high, c.name);
}

// a [7, 29] op b, b in the given layout; `alpha` for add/sub.
// 29 columns take the strided kernel for every broadcast; 64 (whole 16-byte vectors) the row
// kernel for the broadcast row, the value per row and the dense rows of a transposed a's
// neighbours (ops/cuda/elementwise_plan.h, plan_rows).
template <typename H>
void check_binary(BinaryOp op, double alpha, const std::string& name) {
  struct BLayout {
    const char* name;
    Shape a_strides, b_strides;
    std::size_t b_elements;
  };
  constexpr std::int64_t rows = 7;
  for (const std::int64_t cols : {std::int64_t{29}, std::int64_t{64}}) {
    const auto n = static_cast<std::size_t>(rows * cols);
    const BLayout layouts[] = {
        {"dense", {cols, 1}, {cols, 1}, n},
        {"broadcast row", {cols, 1}, {0, 1}, static_cast<std::size_t>(cols)},
        {"value per row", {cols, 1}, {1, 0}, static_cast<std::size_t>(rows)},
        {"broadcast scalar", {cols, 1}, {0, 0}, 1},
        {"a transposed", {1, rows}, {cols, 1}, n},
    };
    const Shape sizes{rows, cols};
    for (const BLayout& layout : layouts) {
      const std::string what =
          name + " " + dtype_name(DTypeOf<H>::value) + " " + layout.name + " " + std::to_string(cols) + " columns";
      std::vector<H> a = inputs<H>(n, 31, -3, 3);
      std::vector<H> b = inputs<H>(layout.b_elements, 32, -3, 3);
      if (layout.b_elements == n) {
        for (std::size_t i = 0; i < n; i += 5) b[i] = a[i];  // equal pairs for Equal, ties for max/min
      }
      const std::vector<float> af = to_float(a), bf = to_float(b);
      std::vector<float> reference(n);
      binary(Context::for_device(Device::cpu()), op, DType::Float32, sizes, {reference.data(), {cols, 1}},
             {af.data(), layout.a_strides}, {bf.data(), layout.b_strides}, alpha);
      DeviceBuffer<H> da(a), db(b), out(n);
      binary(gpu_context(), op, DTypeOf<H>::value, sizes, {out.get(), {cols, 1}}, {da.get(), layout.a_strides},
             {db.get(), layout.b_strides}, alpha);
      std::vector<double> allowance;
      if (op == BinaryOp::Add || op == BinaryOp::Sub) {
        // Element (r, c) of a and b as the kernel reads them.
        std::vector<float> x(n), ay(n);
        for (std::int64_t r = 0; r < rows; ++r) {
          for (std::int64_t c = 0; c < cols; ++c) {
            x[r * cols + c] = af[r * layout.a_strides[0] + c * layout.a_strides[1]];
            ay[r * cols + c] = static_cast<float>(alpha) * bf[r * layout.b_strides[0] + c * layout.b_strides[1]];
          }
        }
        allowance = cancellation_allowance(x, ay);
      }
      expect_half_close(out.download(), reference, rtol<H>(), atol<H>(), what, allowance);
    }
  }
}

template <typename H>
void check_binary_ops() {
  check_binary<H>(BinaryOp::Add, 1.0, "add");
  check_binary<H>(BinaryOp::Add, 0.3, "add alpha 0.3");
  check_binary<H>(BinaryOp::Sub, 1.0, "sub");
  check_binary<H>(BinaryOp::Sub, -1.7, "sub alpha -1.7");
  check_binary<H>(BinaryOp::Mul, 1.0, "mul");
  check_binary<H>(BinaryOp::Div, 1.0, "div");
  check_binary<H>(BinaryOp::Maximum, 1.0, "maximum");
  check_binary<H>(BinaryOp::Minimum, 1.0, "minimum");
  check_binary<H>(BinaryOp::Equal, 1.0, "equal");
  check_binary<H>(BinaryOp::ReluBackward, 1.0, "relu_backward");
}

template <typename H>
void check_ternary(TernaryOp op, const std::string& name) {
  const double value = -0.3;
  for (const bool broadcast : {false, true}) {
    const std::string what = name + " " + dtype_name(DTypeOf<H>::value) + (broadcast ? " broadcast c" : " dense");
    const std::vector<H> a = inputs<H>(203, 41, -3, 3), b = inputs<H>(203, 42, -3, 3);
    const std::vector<H> c = inputs<H>(broadcast ? 29 : 203, 43, 0.5, 3);
    const Shape c_strides = broadcast ? Shape{0, 1} : Shape{29, 1};
    const std::vector<float> af = to_float(a), bf = to_float(b), cf = to_float(c);
    std::vector<float> reference(203);
    ternary(Context::for_device(Device::cpu()), op, DType::Float32, {7, 29}, {reference.data(), {29, 1}},
            {af.data(), {29, 1}}, {bf.data(), {29, 1}}, {cf.data(), c_strides}, value);
    DeviceBuffer<H> da(a), db(b), dc(c), out(203);
    ternary(gpu_context(), op, DTypeOf<H>::value, {7, 29}, {out.get(), {29, 1}}, {da.get(), {29, 1}},
            {db.get(), {29, 1}}, {dc.get(), c_strides}, value);
    std::vector<float> term(203);
    for (std::size_t i = 0; i < 203; ++i) {
      const float ci = cf[broadcast ? i % 29 : i];
      term[i] = static_cast<float>(value) * bf[i] * (op == TernaryOp::AddCMul ? ci : 1.0f / ci);
    }
    expect_half_close(out.download(), reference, rtol<H>(), atol<H>(), what, cancellation_allowance(af, term));
  }
}

// acc += g ten times in place (the autograd engine's accumulation): each step one float32 add of
// the previous 16-bit result and g, rounded once. Checked step by step against the float32 sum
// of what the GPU held, so roundings do not compound in the comparison.
template <typename H>
void check_inplace_accumulation() {
  const std::string name = std::string("add_ ") + dtype_name(DTypeOf<H>::value);
  DeviceBuffer<H> acc(inputs<H>(203, 51, -1, 1));
  for (int step = 0; step < 10; ++step) {
    const std::vector<H> before = acc.download();
    const std::vector<H> g = to_half<H>(random_values<float>(203, 60 + step, -1, 1));
    DeviceBuffer<H> dg(g);
    binary(gpu_context(), BinaryOp::Add, DTypeOf<H>::value, {203}, {acc.get(), {1}}, {acc.get(), {1}},
           {dg.get(), {1}}, 1.0);
    const std::vector<float> bf = to_float(before), gf = to_float(g);
    std::vector<float> reference(203);
    binary(Context::for_device(Device::cpu()), BinaryOp::Add, DType::Float32, {203}, {reference.data(), {1}},
           {bf.data(), {1}}, {gf.data(), {1}}, 1.0);
    expect_half_close(acc.download(), reference, rtol<H>(), atol<H>(), name + " step " + std::to_string(step));
    // Same bits as a separate output: in place changes nothing about the arithmetic.
    DeviceBuffer<H> db(before), out(203);
    binary(gpu_context(), BinaryOp::Add, DTypeOf<H>::value, {203}, {out.get(), {1}}, {db.get(), {1}}, {dg.get(), {1}},
           1.0);
    expect_half_bits_equal(acc.download(), out.download(), name + " in place against out of place");
  }
}

// Dropout forward (backward is the same kernel) at p = 0.3 over 1000 elements with specials,
// against the float32 CPU kernel with the same seed and offset.
template <typename H>
void check_dropout() {
  const std::vector<H> input = inputs<H>(1000, 71, -3, 3);
  const std::vector<float> input_f = to_float(input);
  std::vector<float> reference(1000);
  dropout_forward(Context::for_device(Device::cpu()), 1000, DType::Float32, input_f.data(), 0.3, 1234, 77,
                  reference.data());
  DeviceBuffer<H> in(input), out(1000);
  dropout_forward(gpu_context(), 1000, DTypeOf<H>::value, in.get(), 0.3, 1234, 77, out.get());
  expect_half_close(out.download(), reference, rtol<H>(), atol<H>(),
                    std::string("dropout ") + dtype_name(DTypeOf<H>::value));
}

}  // namespace

TEST(CudaHalfElementwise, BFloat16UnaryOpsMatchTheFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("bfloat16 unary kernels against the float32 CPU kernel");
  check_unary_ops<BFloat16>();
}

TEST(CudaHalfElementwise, Float16UnaryOpsMatchTheFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("float16 unary kernels against the float32 CPU kernel");
  check_unary_ops<Float16>();
}

TEST(CudaHalfElementwise, BFloat16BinaryOpsAndReluBackwardMatchTheFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("bfloat16 binary kernels against the float32 CPU kernel");
  check_binary_ops<BFloat16>();
}

TEST(CudaHalfElementwise, Float16BinaryOpsAndReluBackwardMatchTheFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("float16 binary kernels against the float32 CPU kernel");
  check_binary_ops<Float16>();
}

TEST(CudaHalfElementwise, AddcmulAndAddcdivMatchTheFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit ternary kernels against the float32 CPU kernel");
  check_ternary<BFloat16>(TernaryOp::AddCMul, "addcmul");
  check_ternary<BFloat16>(TernaryOp::AddCDiv, "addcdiv");
  check_ternary<Float16>(TernaryOp::AddCMul, "addcmul");
  check_ternary<Float16>(TernaryOp::AddCDiv, "addcdiv");
}

TEST(CudaHalfElementwise, InPlaceAddAccumulatesWithOneRoundingPerStep) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit in-place add_ (gradient accumulation)");
  check_inplace_accumulation<BFloat16>();
  check_inplace_accumulation<Float16>();
}

TEST(CudaHalfElementwise, DropoutKeepsTheFloat32CpuMaskAndScale) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit dropout against the float32 CPU kernel");
  check_dropout<BFloat16>();
  check_dropout<Float16>();
}
