// Elementwise ops with NumPy broadcasting, their backward closures, and the in-place variants.
#include "core/errors.h"
#include "ops/elementwise.h"
#include "runtime/autograd/function.h"
#include "runtime/elementwise_run.h"
#include "runtime/factories.h"
#include "runtime/kernel_args.h"

namespace sublet {

namespace detail {
// Every kernel call of this file goes through these.
void run_unary(ops::UnaryOp kind, const Tensor& out, ops::ConstStridedRef in, ops::UnaryParams params) {
  Shape sizes = out.sizes();
  ops::StridedRef dst = out_ref(out);
  coalesce_elementwise(sizes, dst, {&in});
  ops::unary(context_for(out), kind, out.dtype(), sizes, dst, in, params);
}

void run_binary(ops::BinaryOp kind, const Tensor& out, ops::ConstStridedRef a, ops::ConstStridedRef b, double alpha) {
  Shape sizes = out.sizes();
  ops::StridedRef dst = out_ref(out);
  coalesce_elementwise(sizes, dst, {&a, &b});
  ops::binary(context_for(out), kind, out.dtype(), sizes, dst, a, b, alpha);
}
}  // namespace detail

namespace {

using autograd::save;
using detail::run_binary;
using detail::run_unary;
using autograd::TensorList;

void check_binary(const char* op, const Tensor& a, const Tensor& b) {
  detail::check_defined(op, a);
  detail::check_defined(op, b);
  detail::check_same_device(op, a, b);
  detail::check_same_dtype(op, a, b);
}

// PyTorch's type promotion for the mix autocast makes common: a 16-bit tensor with a float32 or
// float64 one (a bfloat16 conv output plus a float32 residual). The op runs in the wider type;
// the cast up is an autograd op, so the narrow operand's gradient comes back in its own dtype.
// Other mixes of dtypes still throw in check_same_dtype.
bool is_half(DType d) { return d == DType::BFloat16 || d == DType::Float16; }
bool mixes_half(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.dtype() == b.dtype()) return false;
  const auto floating = [](DType d) { return d == DType::Float32 || d == DType::Float64 || is_half(d); };
  return (is_half(a.dtype()) || is_half(b.dtype())) && floating(a.dtype()) && floating(b.dtype());
}
Tensor promoted(const Tensor& t, const Tensor& other) {
  const bool wide = t.dtype() == DType::Float64 || other.dtype() == DType::Float64;
  return t.to(wide ? DType::Float64 : DType::Float32);
}

// The output takes the layout of the first operand with its shape and a dense layout
// (channels-last in, channels-last out), else contiguous.
Tensor binary_forward(const char* op, ops::BinaryOp kind, const Tensor& a, const Tensor& b, double alpha = 1.0) {
  check_binary(op, a, b);
  const Shape shape = broadcast_shapes(op, a.sizes(), b.sizes());
  Tensor out = detail::empty_elementwise_output(shape, a.options(), {&a, &b});
  run_binary(kind, out, detail::in_ref(op, a, shape), detail::in_ref(op, b, shape), alpha);
  return out;
}

Tensor unary_forward(const char* op, ops::UnaryOp kind, const Tensor& x, ops::UnaryParams params = {}) {
  detail::check_defined(op, x);
  if (ops::unary_needs_floating(kind)) detail::check_floating(op, x);
  Tensor out = detail::empty_elementwise_output(x.sizes(), x.options(), {&x});
  run_unary(kind, out, detail::in_ref(x), params);
  return out;
}

// The two gradients of a broadcasting binary op, each summed back to its input's shape.
TensorList reduce_pair(const Tensor& ga, const Shape& a_sizes, const Tensor& gb, const Shape& b_sizes) {
  return {ga.defined() ? detail::sum_to(ga, a_sizes) : Tensor(), gb.defined() ? detail::sum_to(gb, b_sizes) : Tensor()};
}

Tensor& inplace_binary(const char* op, ops::BinaryOp kind, Tensor& self, const Tensor& other, double alpha = 1.0) {
  check_binary(op, self, other);
  detail::begin_inplace(op, self, &other);
  const Shape shape = broadcast_shapes(op, self.sizes(), other.sizes());
  if (shape != self.sizes()) {
    throw ShapeError(std::string(op) + ": shapes " + shape_str(self.sizes()) + " and " + shape_str(other.sizes()) +
                     " broadcast to " + shape_str(shape) + ", which does not fit the in-place target");
  }
  run_binary(kind, self, detail::in_ref(self), detail::in_ref(op, other, shape), alpha);
  return self;
}

Tensor& inplace_unary(const char* op, ops::UnaryOp kind, Tensor& self, ops::UnaryParams params = {}) {
  detail::check_defined(op, self);
  detail::begin_inplace(op, self);
  if (ops::unary_needs_floating(kind)) detail::check_floating(op, self);
  run_unary(kind, self, detail::in_ref(self), params);
  return self;
}

}  // namespace

Tensor Tensor::add(const Tensor& other, double alpha) const {
  if (mixes_half(*this, other)) return promoted(*this, other).add(promoted(other, *this), alpha);
  Tensor out = binary_forward("add", ops::BinaryOp::Add, *this, other, alpha);
  if (autograd::any_requires_grad({*this, other})) {
    autograd::record("add", {*this, other}, {out}, [a = sizes(), b = other.sizes(), alpha](const TensorList& g) {
      return reduce_pair(g[0], a, alpha == 1.0 ? g[0] : g[0] * alpha, b);
    });
  }
  return out;
}

Tensor Tensor::sub(const Tensor& other, double alpha) const {
  if (mixes_half(*this, other)) return promoted(*this, other).sub(promoted(other, *this), alpha);
  Tensor out = binary_forward("sub", ops::BinaryOp::Sub, *this, other, alpha);
  if (autograd::any_requires_grad({*this, other})) {
    autograd::record("sub", {*this, other}, {out}, [a = sizes(), b = other.sizes(), alpha](const TensorList& g) {
      return reduce_pair(g[0], a, g[0] * (-alpha), b);
    });
  }
  return out;
}

Tensor Tensor::mul(const Tensor& other) const {
  if (mixes_half(*this, other)) return promoted(*this, other).mul(promoted(other, *this));
  Tensor out = binary_forward("mul", ops::BinaryOp::Mul, *this, other);
  if (autograd::any_requires_grad({*this, other})) {
    const bool need_a = requires_grad(), need_b = other.requires_grad();
    autograd::record("mul", {*this, other}, {out},
                     [a = need_b ? save(*this) : Tensor(), b = need_a ? save(other) : Tensor(), sa = sizes(),
                      sb = other.sizes()](const TensorList& g) {
                       return reduce_pair(b.defined() ? g[0] * b : Tensor(), sa, a.defined() ? g[0] * a : Tensor(), sb);
                     });
  }
  return out;
}

Tensor Tensor::div(const Tensor& other) const {
  if (mixes_half(*this, other)) return promoted(*this, other).div(promoted(other, *this));
  Tensor out = binary_forward("div", ops::BinaryOp::Div, *this, other);
  if (autograd::any_requires_grad({*this, other})) {
    const bool need_b = other.requires_grad();
    autograd::record("div", {*this, other}, {out},
                     [a = need_b ? save(*this) : Tensor(), b = save(other), sa = sizes(), sb = other.sizes()](
                         const TensorList& g) {
                       Tensor ga = g[0] / b;
                       Tensor gb = a.defined() ? -(ga * a / b) : Tensor();
                       return reduce_pair(ga, sa, gb, sb);
                     });
  }
  return out;
}

namespace {
// maximum/minimum: the gradient goes to the input that won (to `a` on ties).
Tensor extremum2(const char* op, ops::BinaryOp kind, const Tensor& a, const Tensor& b) {
  if (mixes_half(a, b)) return extremum2(op, kind, promoted(a, b), promoted(b, a));
  Tensor out = binary_forward(op, kind, a, b);
  if (autograd::any_requires_grad({a, b})) {
    Tensor b_wins;
    {
      NoGradGuard no_grad;
      Tensor diff = kind == ops::BinaryOp::Maximum ? b - a : a - b;
      b_wins = unary_forward(op, ops::UnaryOp::Positive, diff);
    }
    autograd::record(op, {a, b}, {out}, [b_wins, sa = a.sizes(), sb = b.sizes()](const TensorList& g) {
      Tensor gb = g[0] * b_wins;
      return reduce_pair(g[0] - gb, sa, gb, sb);
    });
  }
  return out;
}
}  // namespace

Tensor Tensor::maximum(const Tensor& other) const { return extremum2("maximum", ops::BinaryOp::Maximum, *this, other); }
Tensor Tensor::minimum(const Tensor& other) const { return extremum2("minimum", ops::BinaryOp::Minimum, *this, other); }

Tensor Tensor::eq(const Tensor& other) const {
  NoGradGuard no_grad;
  if (mixes_half(*this, other)) return promoted(*this, other).eq(promoted(other, *this));
  return binary_forward("eq", ops::BinaryOp::Equal, *this, other);
}

Tensor Tensor::add(double value) const {
  Tensor out = unary_forward("add", ops::UnaryOp::AddScalar, *this, {value});
  if (autograd::any_requires_grad({*this})) {
    autograd::record("add_scalar", {*this}, {out}, [](const TensorList& g) { return TensorList{g[0]}; });
  }
  return out;
}

Tensor Tensor::sub(double value) const { return add(-value); }

Tensor Tensor::mul(double value) const {
  Tensor out = unary_forward("mul", ops::UnaryOp::MulScalar, *this, {value});
  if (autograd::any_requires_grad({*this})) {
    autograd::record("mul_scalar", {*this}, {out}, [value](const TensorList& g) { return TensorList{g[0] * value}; });
  }
  return out;
}

Tensor Tensor::div(double value) const {
  Tensor out = unary_forward("div", ops::UnaryOp::DivScalar, *this, {value});
  if (autograd::any_requires_grad({*this})) {
    autograd::record("div_scalar", {*this}, {out}, [value](const TensorList& g) { return TensorList{g[0] / value}; });
  }
  return out;
}

Tensor Tensor::neg() const {
  Tensor out = unary_forward("neg", ops::UnaryOp::Neg, *this);
  if (autograd::any_requires_grad({*this})) {
    autograd::record("neg", {*this}, {out}, [](const TensorList& g) { return TensorList{-g[0]}; });
  }
  return out;
}

Tensor Tensor::relu() const {
  Tensor out = unary_forward("relu", ops::UnaryOp::Relu, *this);
  if (autograd::any_requires_grad({*this})) {
    // One pass over grad and output (PyTorch's threshold_backward), not a 0/1 mask and a multiply:
    // ReLU's backward runs once per ReLU of a network (49 times a ResNet-50 step).
    autograd::record("relu", {*this}, {out}, [y = save(out)](const TensorList& g) {
      return TensorList{binary_forward("relu_backward", ops::BinaryOp::ReluBackward, g[0], y)};
    });
  }
  return out;
}

Tensor Tensor::exp() const {
  Tensor out = unary_forward("exp", ops::UnaryOp::Exp, *this);
  if (autograd::any_requires_grad({*this})) {
    autograd::record("exp", {*this}, {out}, [y = save(out)](const TensorList& g) { return TensorList{g[0] * y}; });
  }
  return out;
}

Tensor Tensor::log() const {
  Tensor out = unary_forward("log", ops::UnaryOp::Log, *this);
  if (autograd::any_requires_grad({*this})) {
    autograd::record("log", {*this}, {out}, [x = save(*this)](const TensorList& g) { return TensorList{g[0] / x}; });
  }
  return out;
}

Tensor Tensor::sqrt() const {
  Tensor out = unary_forward("sqrt", ops::UnaryOp::Sqrt, *this);
  if (autograd::any_requires_grad({*this})) {
    autograd::record("sqrt", {*this}, {out},
                     [y = save(out)](const TensorList& g) { return TensorList{g[0] / y * 0.5}; });
  }
  return out;
}

Tensor Tensor::pow(double exponent) const {
  Tensor out = unary_forward("pow", ops::UnaryOp::Pow, *this, {exponent});
  if (autograd::any_requires_grad({*this})) {
    autograd::record("pow", {*this}, {out}, [x = save(*this), exponent](const TensorList& g) {
      if (exponent == 1.0) return TensorList{g[0]};
      return TensorList{g[0] * x.pow(exponent - 1.0) * exponent};
    });
  }
  return out;
}

Tensor Tensor::clamp(double min, double max) const {
  if (min > max) throw ValueError("clamp: min " + std::to_string(min) + " is above max " + std::to_string(max));
  Tensor out = unary_forward("clamp", ops::UnaryOp::Clamp, *this, {min, max});
  if (autograd::any_requires_grad({*this})) {
    autograd::record("clamp", {*this}, {out}, [x = save(*this), min, max](const TensorList& g) {
      return TensorList{g[0] * unary_forward("clamp", ops::UnaryOp::InRange, x, {min, max})};
    });
  }
  return out;
}

Tensor Tensor::sigmoid() const {
  Tensor out = unary_forward("sigmoid", ops::UnaryOp::Sigmoid, *this);
  if (autograd::any_requires_grad({*this})) {
    autograd::record("sigmoid", {*this}, {out},
                     [y = save(out)](const TensorList& g) { return TensorList{g[0] * y * (1.0 - y)}; });
  }
  return out;
}

Tensor Tensor::tanh() const {
  Tensor out = unary_forward("tanh", ops::UnaryOp::Tanh, *this);
  if (autograd::any_requires_grad({*this})) {
    autograd::record("tanh", {*this}, {out},
                     [y = save(out)](const TensorList& g) { return TensorList{g[0] * (1.0 - y * y)}; });
  }
  return out;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) { return inplace_binary("add_", ops::BinaryOp::Add, *this, other, alpha); }
Tensor& Tensor::sub_(const Tensor& other, double alpha) { return inplace_binary("sub_", ops::BinaryOp::Sub, *this, other, alpha); }
Tensor& Tensor::mul_(const Tensor& other) { return inplace_binary("mul_", ops::BinaryOp::Mul, *this, other); }
Tensor& Tensor::div_(const Tensor& other) { return inplace_binary("div_", ops::BinaryOp::Div, *this, other); }
Tensor& Tensor::add_(double value) { return inplace_unary("add_", ops::UnaryOp::AddScalar, *this, {value}); }
Tensor& Tensor::mul_(double value) { return inplace_unary("mul_", ops::UnaryOp::MulScalar, *this, {value}); }
Tensor& Tensor::div_(double value) { return inplace_unary("div_", ops::UnaryOp::DivScalar, *this, {value}); }
Tensor& Tensor::sqrt_() { return inplace_unary("sqrt_", ops::UnaryOp::Sqrt, *this); }
Tensor& Tensor::clamp_(double min, double max) {
  if (min > max) throw ValueError("clamp_: min " + std::to_string(min) + " is above max " + std::to_string(max));
  return inplace_unary("clamp_", ops::UnaryOp::Clamp, *this, {min, max});
}

namespace {
Tensor& inplace_ternary(const char* op, ops::TernaryOp kind, Tensor& self, const Tensor& a, const Tensor& b,
                        double value) {
  check_binary(op, self, a);
  check_binary(op, self, b);
  detail::begin_inplace(op, self, &a);
  detail::begin_inplace(op, self, &b);
  const Shape shape = broadcast_shapes(op, self.sizes(), broadcast_shapes(op, a.sizes(), b.sizes()));
  if (shape != self.sizes()) {
    throw ShapeError(std::string(op) + ": shapes " + shape_str(a.sizes()) + " and " + shape_str(b.sizes()) +
                     " do not fit the in-place target of shape " + shape_str(self.sizes()));
  }
  Shape sizes = shape;
  ops::StridedRef out = detail::out_ref(self);
  ops::ConstStridedRef in_self = detail::in_ref(self), in_a = detail::in_ref(op, a, shape),
                       in_b = detail::in_ref(op, b, shape);
  detail::coalesce_elementwise(sizes, out, {&in_self, &in_a, &in_b});
  ops::ternary(detail::context_for(self), kind, self.dtype(), sizes, out, in_self, in_a, in_b, value);
  return self;
}
}  // namespace

Tensor& Tensor::addcmul_(const Tensor& a, const Tensor& b, double value) {
  return inplace_ternary("addcmul_", ops::TernaryOp::AddCMul, *this, a, b, value);
}
Tensor& Tensor::addcdiv_(const Tensor& a, const Tensor& b, double value) {
  return inplace_ternary("addcdiv_", ops::TernaryOp::AddCDiv, *this, a, b, value);
}

}  // namespace sublet
