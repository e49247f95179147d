#include "ops/cpu/half_adapters_cpu.h"

#include <algorithm>
#include <cstdint>

#include "core/half.h"
#include "ops/batch_norm_kernels.h"
#include "ops/conv2d_kernels.h"
#include "ops/copy_kernels.h"
#include "ops/cpu/batch_norm_cpu.h"
#include "ops/cpu/conv2d_cpu.h"
#include "ops/cpu/copy_cpu.h"
#include "ops/cpu/elementwise_cpu.h"
#include "ops/cpu/gelu_cpu.h"
#include "ops/cpu/matmul_cpu.h"
#include "ops/cpu/pooling_cpu.h"
#include "ops/cpu/reduce_cpu.h"
#include "ops/elementwise_kernels.h"
#include "ops/gelu_kernels.h"
#include "ops/matmul_kernels.h"
#include "ops/pooling_kernels.h"
#include "ops/reduce_kernels.h"

namespace sublet::ops::cpu {
namespace {

constexpr DType kF32 = DType::Float32;

Shape dense_strides(const Shape& sizes) {
  Shape strides(sizes.size(), 1);
  for (std::size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * std::max<std::int64_t>(sizes[d], 1);
  return strides;
}

// A dense float32 buffer of `count` elements, a workspace of the kernel call.
class Scratch {
 public:
  Scratch(const Context& ctx, std::int64_t count)
      : block_(ctx.workspace(static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(float))) {}
  float* data() const { return static_cast<float*>(block_.get()); }

 private:
  memory::ScopedBlock block_;
};

// A strided 16-bit operand (any view: broadcast, transposed) read into a dense float32 buffer.
Scratch widen(const Context& ctx, DType dtype, const Shape& sizes, ConstStridedRef in) {
  Scratch s(ctx, shape_numel(sizes));
  copy<float>(ctx, sizes, kF32, StridedRef{s.data(), dense_strides(sizes)}, dtype, in);
  return s;
}

// A dense 16-bit buffer of `count` elements, or none (an optional operand such as a bias).
Scratch widen_dense(const Context& ctx, DType dtype, std::int64_t count, const void* in) {
  if (in == nullptr) return Scratch(ctx, 0);
  return widen(ctx, dtype, Shape{count}, ConstStridedRef{in, Shape{1}});
}

// Rounds the float32 result once into the (strided) 16-bit output.
template <typename H>
void narrow(const Context& ctx, const Shape& sizes, StridedRef out, const float* values) {
  copy<H>(ctx, sizes, DTypeOf<H>::value, std::move(out), kF32, ConstStridedRef{values, dense_strides(sizes)});
}

template <typename H>
void narrow_dense(const Context& ctx, std::int64_t count, void* out, const float* values) {
  if (out != nullptr) narrow<H>(ctx, Shape{count}, StridedRef{out, Shape{1}}, values);
}

// ---- element-wise ----
template <typename H>
void unary_half(const Context& ctx, UnaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef in,
                UnaryParams params) {
  const Shape dense = dense_strides(sizes);
  const Scratch x = widen(ctx, dtype, sizes, in);
  const Scratch y(ctx, shape_numel(sizes));
  unary<float>(ctx, op, kF32, sizes, StridedRef{y.data(), dense}, ConstStridedRef{x.data(), dense}, params);
  narrow<H>(ctx, sizes, std::move(out), y.data());
}

template <typename H>
void binary_half(const Context& ctx, BinaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef a,
                 ConstStridedRef b, double alpha) {
  const Shape dense = dense_strides(sizes);
  const Scratch x = widen(ctx, dtype, sizes, a), y = widen(ctx, dtype, sizes, b);
  const Scratch z(ctx, shape_numel(sizes));
  binary<float>(ctx, op, kF32, sizes, StridedRef{z.data(), dense}, ConstStridedRef{x.data(), dense},
                ConstStridedRef{y.data(), dense}, alpha);
  narrow<H>(ctx, sizes, std::move(out), z.data());
}

template <typename H>
void ternary_half(const Context& ctx, TernaryOp op, DType dtype, const Shape& sizes, StridedRef out,
                  ConstStridedRef a, ConstStridedRef b, ConstStridedRef c, double value) {
  const Shape dense = dense_strides(sizes);
  // All inputs are read before the output is written: `out` may alias `a` (addcmul_).
  const Scratch x = widen(ctx, dtype, sizes, a), y = widen(ctx, dtype, sizes, b), w = widen(ctx, dtype, sizes, c);
  const Scratch z(ctx, shape_numel(sizes));
  ternary<float>(ctx, op, kF32, sizes, StridedRef{z.data(), dense}, ConstStridedRef{x.data(), dense},
                 ConstStridedRef{y.data(), dense}, ConstStridedRef{w.data(), dense}, value);
  narrow<H>(ctx, sizes, std::move(out), z.data());
}

// ---- reductions: the input is read as (outer dims, inner dims), made dense in that order ----
struct DenseReduction {
  Scratch input;
  ReduceGeometry geometry;
  std::int64_t outputs;
};

DenseReduction widen_reduction(const Context& ctx, DType dtype, const ReduceGeometry& g, const void* in) {
  Shape sizes = g.outer_sizes, strides = g.outer_strides;
  sizes.insert(sizes.end(), g.inner_sizes.begin(), g.inner_sizes.end());
  strides.insert(strides.end(), g.inner_strides.begin(), g.inner_strides.end());
  const Shape dense = dense_strides(sizes);
  ReduceGeometry d;
  d.outer_sizes = g.outer_sizes;
  d.inner_sizes = g.inner_sizes;
  d.outer_strides.assign(dense.begin(), dense.begin() + static_cast<std::ptrdiff_t>(g.outer_sizes.size()));
  d.inner_strides.assign(dense.begin() + static_cast<std::ptrdiff_t>(g.outer_sizes.size()), dense.end());
  return DenseReduction{widen(ctx, dtype, sizes, ConstStridedRef{in, strides}), d, shape_numel(g.outer_sizes)};
}

template <typename H>
void reduce_sum_half(const Context& ctx, DType dtype, const ReduceGeometry& g, void* out, const void* in,
                     double scale) {
  const DenseReduction r = widen_reduction(ctx, dtype, g, in);
  const Scratch sums(ctx, r.outputs);
  reduce_sum<float>(ctx, kF32, r.geometry, sums.data(), r.input.data(), scale);
  narrow_dense<H>(ctx, r.outputs, out, sums.data());
}

template <typename H>
void reduce_extremum_half(const Context& ctx, ExtremumKind kind, DType dtype, const ReduceGeometry& g, void* values,
                          std::int64_t* indices, const void* in) {
  const DenseReduction r = widen_reduction(ctx, dtype, g, in);
  const Scratch best(ctx, r.outputs);
  reduce_extremum<float>(ctx, kind, kF32, r.geometry, best.data(), indices, r.input.data());
  narrow_dense<H>(ctx, r.outputs, values, best.data());
}

// ---- matmul: each operand made a dense row-major [batch or 1, rows, cols] float32 buffer ----
struct DenseMatrix {
  Scratch data;
  std::int64_t batch_stride, row_stride;
};

DenseMatrix widen_matrix(const Context& ctx, DType dtype, std::int64_t batch, std::int64_t rows, std::int64_t cols,
                         std::int64_t batch_stride, std::int64_t row_stride, std::int64_t col_stride, const void* p) {
  const std::int64_t count = batch_stride == 0 ? 1 : batch;  // stride 0: one matrix broadcast
  Scratch s = widen(ctx, dtype, Shape{count, rows, cols}, ConstStridedRef{p, Shape{batch_stride, row_stride, col_stride}});
  return DenseMatrix{std::move(s), count == 1 ? 0 : rows * cols, cols};
}

template <typename H>
void matmul_half(const Context& ctx, DType dtype, const MatmulGeometry& g, void* out, const void* a, const void* b) {
  const DenseMatrix x = widen_matrix(ctx, dtype, g.batch, g.m, g.k, g.a_batch_stride, g.a_row_stride, g.a_col_stride, a);
  const DenseMatrix y = widen_matrix(ctx, dtype, g.batch, g.k, g.n, g.b_batch_stride, g.b_row_stride, g.b_col_stride, b);
  MatmulGeometry d = g;
  d.a_batch_stride = x.batch_stride;
  d.a_row_stride = x.row_stride;
  d.a_col_stride = 1;
  d.b_batch_stride = y.batch_stride;
  d.b_row_stride = y.row_stride;
  d.b_col_stride = 1;
  const std::int64_t count = g.batch * g.m * g.n;
  const Scratch z(ctx, count);
  matmul<float>(ctx, kF32, d, z.data(), x.data.data(), y.data.data());
  narrow_dense<H>(ctx, count, out, z.data());
}

// ---- conv2d (NCHW; every buffer dense) ----
template <typename H>
void conv2d_forward_half(const Context& ctx, const Conv2dShape& s, DType dtype, const void* input, const void* weight,
                         const void* bias, void* output) {
  const Scratch x = widen_dense(ctx, dtype, s.input_numel(), input);
  const Scratch w = widen_dense(ctx, dtype, s.weight_numel(), weight);
  const Scratch b = widen_dense(ctx, dtype, s.out_channels, bias);
  const Scratch y(ctx, s.output_numel());
  conv2d_forward<float>(ctx, s, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
  narrow_dense<H>(ctx, s.output_numel(), output, y.data());
}

template <typename H>
void conv2d_backward_input_half(const Context& ctx, const Conv2dShape& s, DType dtype, const void* grad_output,
                                const void* weight, void* grad_input) {
  const Scratch gy = widen_dense(ctx, dtype, s.output_numel(), grad_output);
  const Scratch w = widen_dense(ctx, dtype, s.weight_numel(), weight);
  const Scratch gx(ctx, s.input_numel());
  conv2d_backward_input<float>(ctx, s, gy.data(), w.data(), gx.data());
  narrow_dense<H>(ctx, s.input_numel(), grad_input, gx.data());
}

template <typename H>
void conv2d_backward_weight_half(const Context& ctx, const Conv2dShape& s, DType dtype, const void* grad_output,
                                 const void* input, void* grad_weight, void* grad_bias) {
  const Scratch gy = widen_dense(ctx, dtype, s.output_numel(), grad_output);
  const Scratch x = widen_dense(ctx, dtype, s.input_numel(), input);
  const Scratch gw(ctx, s.weight_numel()), gb(ctx, s.out_channels);
  conv2d_backward_weight<float>(ctx, s, gy.data(), x.data(), gw.data(), grad_bias ? gb.data() : nullptr);
  narrow_dense<H>(ctx, s.weight_numel(), grad_weight, gw.data());
  narrow_dense<H>(ctx, s.out_channels, grad_bias, gb.data());
}

// ---- batch norm: 16-bit activations, float32 parameters and statistics (the contract of
// ops/batch_norm_kernels.h for 16-bit inputs, as cuDNN's) ----
const float* f32(const void* p) { return static_cast<const float*>(p); }
float* f32(void* p) { return static_cast<float*>(p); }

template <typename H>
void batch_norm_forward_training_half(const Context& ctx, const BatchNormShape& s, DType dtype, const void* input,
                                      const void* weight, const void* bias, void* running_mean, void* running_var,
                                      double momentum, double eps, void* output, void* save_mean, void* save_invstd) {
  const Scratch x = widen_dense(ctx, dtype, s.numel(), input);
  const Scratch y(ctx, s.numel());
  batch_norm_forward_training<float>(s, x.data(), f32(weight), f32(bias), f32(running_mean), f32(running_var),
                                     momentum, eps, y.data(), f32(save_mean), f32(save_invstd));
  narrow_dense<H>(ctx, s.numel(), output, y.data());
}

template <typename H>
void batch_norm_forward_eval_half(const Context& ctx, const BatchNormShape& s, DType dtype, const void* input,
                                  const void* weight, const void* bias, const void* running_mean,
                                  const void* running_var, double eps, void* output) {
  const Scratch x = widen_dense(ctx, dtype, s.numel(), input);
  const Scratch y(ctx, s.numel());
  batch_norm_forward_eval<float>(s, x.data(), f32(weight), f32(bias), f32(running_mean), f32(running_var), eps,
                                 y.data());
  narrow_dense<H>(ctx, s.numel(), output, y.data());
}

template <typename H>
void batch_norm_backward_training_half(const Context& ctx, const BatchNormShape& s, DType dtype,
                                       const void* grad_output, const void* input, const void* weight,
                                       const void* save_mean, const void* save_invstd, void* grad_input,
                                       void* grad_weight, void* grad_bias) {
  const Scratch gy = widen_dense(ctx, dtype, s.numel(), grad_output), x = widen_dense(ctx, dtype, s.numel(), input);
  const Scratch gx(ctx, grad_input ? s.numel() : 0);
  batch_norm_backward_training<float>(s, gy.data(), x.data(), f32(weight), f32(save_mean), f32(save_invstd),
                                      grad_input ? gx.data() : nullptr, f32(grad_weight), f32(grad_bias));
  narrow_dense<H>(ctx, s.numel(), grad_input, gx.data());
}

template <typename H>
void batch_norm_backward_eval_half(const Context& ctx, const BatchNormShape& s, DType dtype, const void* grad_output,
                                   const void* input, const void* weight, const void* running_mean,
                                   const void* running_var, double eps, void* grad_input, void* grad_weight,
                                   void* grad_bias) {
  const Scratch gy = widen_dense(ctx, dtype, s.numel(), grad_output), x = widen_dense(ctx, dtype, s.numel(), input);
  const Scratch gx(ctx, grad_input ? s.numel() : 0);
  batch_norm_backward_eval<float>(s, gy.data(), x.data(), f32(weight), f32(running_mean), f32(running_var), eps,
                                  grad_input ? gx.data() : nullptr, f32(grad_weight), f32(grad_bias));
  narrow_dense<H>(ctx, s.numel(), grad_input, gx.data());
}

// ---- pooling (NCHW) ----
template <typename H>
void max_pool2d_forward_half(const Context& ctx, const Pool2dShape& s, DType dtype, const void* input, void* output,
                             std::int64_t* indices) {
  const Scratch x = widen_dense(ctx, dtype, s.input_numel(), input), y(ctx, s.output_numel());
  max_pool2d_forward<float>(s, x.data(), y.data(), indices);
  narrow_dense<H>(ctx, s.output_numel(), output, y.data());
}

template <typename H>
void max_pool2d_backward_half(const Context& ctx, const Pool2dShape& s, DType dtype, const void* grad_output,
                              const std::int64_t* indices, void* grad_input) {
  const Scratch gy = widen_dense(ctx, dtype, s.output_numel(), grad_output), gx(ctx, s.input_numel());
  max_pool2d_backward<float>(s, gy.data(), indices, gx.data());
  narrow_dense<H>(ctx, s.input_numel(), grad_input, gx.data());
}

template <typename H>
void avg_pool2d_forward_half(const Context& ctx, const Pool2dShape& s, DType dtype, const void* input, void* output,
                             bool count_include_pad) {
  const Scratch x = widen_dense(ctx, dtype, s.input_numel(), input), y(ctx, s.output_numel());
  avg_pool2d_forward<float>(s, x.data(), y.data(), count_include_pad);
  narrow_dense<H>(ctx, s.output_numel(), output, y.data());
}

template <typename H>
void avg_pool2d_backward_half(const Context& ctx, const Pool2dShape& s, DType dtype, const void* grad_output,
                              void* grad_input, bool count_include_pad) {
  const Scratch gy = widen_dense(ctx, dtype, s.output_numel(), grad_output), gx(ctx, s.input_numel());
  avg_pool2d_backward<float>(s, gy.data(), gx.data(), count_include_pad);
  narrow_dense<H>(ctx, s.input_numel(), grad_input, gx.data());
}

template <typename H>
void adaptive_avg_pool2d_forward_half(const Context& ctx, const AdaptivePool2dShape& s, DType dtype,
                                      const void* input, void* output) {
  const Scratch x = widen_dense(ctx, dtype, s.input_numel(), input), y(ctx, s.output_numel());
  adaptive_avg_pool2d_forward<float>(s, x.data(), y.data());
  narrow_dense<H>(ctx, s.output_numel(), output, y.data());
}

template <typename H>
void adaptive_avg_pool2d_backward_half(const Context& ctx, const AdaptivePool2dShape& s, DType dtype,
                                       const void* grad_output, void* grad_input) {
  const Scratch gy = widen_dense(ctx, dtype, s.output_numel(), grad_output), gx(ctx, s.input_numel());
  adaptive_avg_pool2d_backward<float>(s, gy.data(), gx.data());
  narrow_dense<H>(ctx, s.input_numel(), grad_input, gx.data());
}

// ---- GELU (an MLP's activation follows its 16-bit linear under autocast) ----
template <typename H>
void gelu_forward_half(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate,
                       const void* input, void* output) {
  const Scratch x = widen_dense(ctx, dtype, numel, input), y(ctx, numel);
  gelu_forward<float>(ctx, kF32, numel, approximate, x.data(), y.data());
  narrow_dense<H>(ctx, numel, output, y.data());
}

template <typename H>
void gelu_backward_half(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate,
                        const void* grad_output, const void* input, void* grad_input) {
  const Scratch g = widen_dense(ctx, dtype, numel, grad_output), x = widen_dense(ctx, dtype, numel, input);
  const Scratch gx(ctx, numel);
  gelu_backward<float>(ctx, kF32, numel, approximate, g.data(), x.data(), gx.data());
  narrow_dense<H>(ctx, numel, grad_input, gx.data());
}

template <typename H>
void register_for() {
  constexpr DeviceType kCpu = DeviceType::CPU;
  constexpr DType dtype = DTypeOf<H>::value;
  unary_kernels().set(kCpu, dtype, &unary_half<H>);
  binary_kernels().set(kCpu, dtype, &binary_half<H>);
  ternary_kernels().set(kCpu, dtype, &ternary_half<H>);
  reduce_sum_kernels().set(kCpu, dtype, &reduce_sum_half<H>);
  reduce_extremum_kernels().set(kCpu, dtype, &reduce_extremum_half<H>);
  matmul_kernels().set(kCpu, dtype, &matmul_half<H>);
  conv2d_forward_kernels().set(kCpu, dtype, &conv2d_forward_half<H>);
  conv2d_backward_input_kernels().set(kCpu, dtype, &conv2d_backward_input_half<H>);
  conv2d_backward_weight_kernels().set(kCpu, dtype, &conv2d_backward_weight_half<H>);
  batch_norm_forward_training_kernels().set(kCpu, dtype, &batch_norm_forward_training_half<H>);
  batch_norm_forward_eval_kernels().set(kCpu, dtype, &batch_norm_forward_eval_half<H>);
  batch_norm_backward_training_kernels().set(kCpu, dtype, &batch_norm_backward_training_half<H>);
  batch_norm_backward_eval_kernels().set(kCpu, dtype, &batch_norm_backward_eval_half<H>);
  max_pool2d_forward_kernels().set(kCpu, dtype, &max_pool2d_forward_half<H>);
  max_pool2d_backward_kernels().set(kCpu, dtype, &max_pool2d_backward_half<H>);
  avg_pool2d_forward_kernels().set(kCpu, dtype, &avg_pool2d_forward_half<H>);
  avg_pool2d_backward_kernels().set(kCpu, dtype, &avg_pool2d_backward_half<H>);
  adaptive_avg_pool2d_forward_kernels().set(kCpu, dtype, &adaptive_avg_pool2d_forward_half<H>);
  adaptive_avg_pool2d_backward_kernels().set(kCpu, dtype, &adaptive_avg_pool2d_backward_half<H>);
  gelu_forward_kernels().set(kCpu, dtype, &gelu_forward_half<H>);
  gelu_backward_kernels().set(kCpu, dtype, &gelu_backward_half<H>);
}

}  // namespace

void register_half_adapters() {
  register_for<BFloat16>();
  register_for<Float16>();
}

}  // namespace sublet::ops::cpu
