#include "ops/cpu/elementwise_cpu.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/errors.h"
#include "ops/cpu/strided_loop.h"

namespace sublet::ops::cpu {
namespace {

template <typename T, typename F>
void map1(const Shape& sizes, StridedRef out, ConstStridedRef in, F f) {
  auto loop = make_loop_shape<2>(sizes, {&out.strides, &in.strides});
  T* o = static_cast<T*>(out.data);
  const T* x = static_cast<const T*>(in.data);
  parallel_for_each_run(loop, [&](const auto& off, std::int64_t n, const auto& st) {
    T* op = o + off[0];
    const T* xp = x + off[1];
    if (st[0] == 1 && st[1] == 1) {
      for (std::int64_t i = 0; i < n; ++i) op[i] = f(xp[i]);
    } else {
      for (std::int64_t i = 0; i < n; ++i) op[i * st[0]] = f(xp[i * st[1]]);
    }
  });
}

template <typename T, typename F>
void map2(const Shape& sizes, StridedRef out, ConstStridedRef a, ConstStridedRef b, F f) {
  auto loop = make_loop_shape<3>(sizes, {&out.strides, &a.strides, &b.strides});
  T* o = static_cast<T*>(out.data);
  const T* x = static_cast<const T*>(a.data);
  const T* y = static_cast<const T*>(b.data);
  parallel_for_each_run(loop, [&](const auto& off, std::int64_t n, const auto& st) {
    T* op = o + off[0];
    const T* xp = x + off[1];
    const T* yp = y + off[2];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
      for (std::int64_t i = 0; i < n; ++i) op[i] = f(xp[i], yp[i]);
    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {  // tensor op broadcast row/scalar
      const T yv = *yp;
      for (std::int64_t i = 0; i < n; ++i) op[i] = f(xp[i], yv);
    } else {
      for (std::int64_t i = 0; i < n; ++i) op[i * st[0]] = f(xp[i * st[1]], yp[i * st[2]]);
    }
  });
}

template <typename T, typename F>
void map3(const Shape& sizes, StridedRef out, ConstStridedRef a, ConstStridedRef b, ConstStridedRef c, F f) {
  auto loop = make_loop_shape<4>(sizes, {&out.strides, &a.strides, &b.strides, &c.strides});
  T* o = static_cast<T*>(out.data);
  const T* x = static_cast<const T*>(a.data);
  const T* y = static_cast<const T*>(b.data);
  const T* z = static_cast<const T*>(c.data);
  parallel_for_each_run(loop, [&](const auto& off, std::int64_t n, const auto& st) {
    for (std::int64_t i = 0; i < n; ++i)
      o[off[0] + i * st[0]] = f(x[off[1] + i * st[1]], y[off[2] + i * st[2]], z[off[3] + i * st[3]]);
  });
}

template <typename T>
void unary_typed(UnaryOp op, const Shape& sizes, StridedRef out, ConstStridedRef in, UnaryParams p) {
  const T a = static_cast<T>(p.a);
  const T b = static_cast<T>(p.b);
  switch (op) {
    case UnaryOp::Neg: return map1<T>(sizes, out, in, [](T x) { return static_cast<T>(-x); });
    case UnaryOp::Relu: return map1<T>(sizes, out, in, [](T x) { return x > T(0) ? x : T(0); });
    case UnaryOp::AddScalar: return map1<T>(sizes, out, in, [a](T x) { return static_cast<T>(x + a); });
    case UnaryOp::MulScalar: return map1<T>(sizes, out, in, [a](T x) { return static_cast<T>(x * a); });
    case UnaryOp::DivScalar: return map1<T>(sizes, out, in, [a](T x) { return static_cast<T>(x / a); });
    case UnaryOp::Clamp: return map1<T>(sizes, out, in, [a, b](T x) { return std::min(std::max(x, a), b); });
    case UnaryOp::Positive: return map1<T>(sizes, out, in, [](T x) { return x > T(0) ? T(1) : T(0); });
    case UnaryOp::InRange: return map1<T>(sizes, out, in, [a, b](T x) { return (x >= a && x <= b) ? T(1) : T(0); });
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    const T e = static_cast<T>(p.a);
    switch (op) {
      case UnaryOp::Exp: return map1<T>(sizes, out, in, [](T x) { return std::exp(x); });
      case UnaryOp::Log: return map1<T>(sizes, out, in, [](T x) { return std::log(x); });
      case UnaryOp::Sqrt: return map1<T>(sizes, out, in, [](T x) { return std::sqrt(x); });
      case UnaryOp::Pow:
        if (e == T(2)) return map1<T>(sizes, out, in, [](T x) { return x * x; });
        return map1<T>(sizes, out, in, [e](T x) { return std::pow(x, e); });
      case UnaryOp::Sigmoid: return map1<T>(sizes, out, in, [](T x) { return T(1) / (T(1) + std::exp(-x)); });
      case UnaryOp::Tanh: return map1<T>(sizes, out, in, [](T x) { return std::tanh(x); });
      default: break;
    }
  }
  throw DTypeError("unary op needs a floating-point tensor");
}

template <typename T>
void binary_typed(BinaryOp op, const Shape& sizes, StridedRef out, ConstStridedRef a, ConstStridedRef b,
                  double alpha_value) {
  const T alpha = static_cast<T>(alpha_value);
  switch (op) {
    case BinaryOp::Add:
      if (alpha_value == 1.0) return map2<T>(sizes, out, a, b, [](T x, T y) { return static_cast<T>(x + y); });
      return map2<T>(sizes, out, a, b, [alpha](T x, T y) { return static_cast<T>(x + alpha * y); });
    case BinaryOp::Sub:
      if (alpha_value == 1.0) return map2<T>(sizes, out, a, b, [](T x, T y) { return static_cast<T>(x - y); });
      return map2<T>(sizes, out, a, b, [alpha](T x, T y) { return static_cast<T>(x - alpha * y); });
    case BinaryOp::Mul: return map2<T>(sizes, out, a, b, [](T x, T y) { return static_cast<T>(x * y); });
    case BinaryOp::Div: return map2<T>(sizes, out, a, b, [](T x, T y) { return static_cast<T>(x / y); });
    case BinaryOp::Maximum: return map2<T>(sizes, out, a, b, [](T x, T y) { return std::max(x, y); });
    case BinaryOp::Minimum: return map2<T>(sizes, out, a, b, [](T x, T y) { return std::min(x, y); });
    case BinaryOp::Equal: return map2<T>(sizes, out, a, b, [](T x, T y) { return x == y ? T(1) : T(0); });
    case BinaryOp::ReluBackward: return map2<T>(sizes, out, a, b, [](T g, T y) { return y > T(0) ? g : T(0); });
  }
}

}  // namespace

template <typename T>
void unary(const Context&, UnaryOp op, DType, const Shape& sizes, StridedRef out, ConstStridedRef in,
           UnaryParams params) {
  unary_typed<T>(op, sizes, std::move(out), std::move(in), params);
}

template <typename T>
void binary(const Context&, BinaryOp op, DType, const Shape& sizes, StridedRef out, ConstStridedRef a,
            ConstStridedRef b, double alpha) {
  binary_typed<T>(op, sizes, std::move(out), std::move(a), std::move(b), alpha);
}

template <typename T>
void ternary(const Context&, TernaryOp op, DType, const Shape& sizes, StridedRef out, ConstStridedRef a,
             ConstStridedRef b, ConstStridedRef c, double value) {
  const T v = static_cast<T>(value);
  if (op == TernaryOp::AddCMul) {
    map3<T>(sizes, out, a, b, c, [v](T x, T y, T z) { return x + v * y * z; });
  } else {
    map3<T>(sizes, out, a, b, c, [v](T x, T y, T z) { return x + v * y / z; });
  }
}

#define SUBLET_INSTANTIATE_ELEMENTWISE(T)                                                                       \
  template void unary<T>(const Context&, UnaryOp, DType, const Shape&, StridedRef, ConstStridedRef, UnaryParams); \
  template void binary<T>(const Context&, BinaryOp, DType, const Shape&, StridedRef, ConstStridedRef,             \
                          ConstStridedRef, double);
SUBLET_INSTANTIATE_ELEMENTWISE(float)
SUBLET_INSTANTIATE_ELEMENTWISE(double)
SUBLET_INSTANTIATE_ELEMENTWISE(std::int64_t)
#undef SUBLET_INSTANTIATE_ELEMENTWISE
template void ternary<float>(const Context&, TernaryOp, DType, const Shape&, StridedRef, ConstStridedRef,
                             ConstStridedRef, ConstStridedRef, double);
template void ternary<double>(const Context&, TernaryOp, DType, const Shape&, StridedRef, ConstStridedRef,
                              ConstStridedRef, ConstStridedRef, double);

}  // namespace sublet::ops::cpu
