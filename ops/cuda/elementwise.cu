// Element-wise kernels over strided operands. The op is a runtime switch inside one kernel per
// (dtype, arity): the switch is uniform across a warp so it costs next to nothing, and it keeps
// the number of template instances (and nvcc time) small. Each formula is the CPU kernel's,
// written with the same operation order so that results agree to the last bits where the
// device math library does (see the tolerances in tests/ops/test_cuda_elementwise.cpp).
#include <type_traits>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/device_guard.h"
#include "ops/cuda/device_math.cuh"
#include "ops/cuda/elementwise_cuda.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/strided_indexer.cuh"

namespace sublet::ops::cuda {
namespace {

template <typename T>
__device__ T apply_unary(UnaryOp op, T x, T a, T b) {
  switch (op) {
    case UnaryOp::Neg: return static_cast<T>(-x);
    case UnaryOp::Relu: return x > T(0) ? x : T(0);
    case UnaryOp::AddScalar: return static_cast<T>(x + a);
    case UnaryOp::MulScalar: return static_cast<T>(x * a);
    case UnaryOp::DivScalar: return static_cast<T>(x / a);
    case UnaryOp::Clamp: return std_min(std_max(x, a), b);
    case UnaryOp::Positive: return x > T(0) ? T(1) : T(0);
    case UnaryOp::InRange: return (x >= a && x <= b) ? T(1) : T(0);
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case UnaryOp::Exp: return device_exp(x);
      case UnaryOp::Log: return device_log(x);
      case UnaryOp::Sqrt: return device_sqrt(x);
      case UnaryOp::Pow: return a == T(2) ? x * x : device_pow(x, a);
      case UnaryOp::Sigmoid: return T(1) / (T(1) + device_exp(-x));
      case UnaryOp::Tanh: return device_tanh(x);
      default: break;
    }
  }
  return x;  // unreachable: the host refuses float-only ops on integers before launching
}

template <typename T>
__device__ T apply_binary(BinaryOp op, T x, T y, T alpha, bool unit_alpha) {
  switch (op) {
    case BinaryOp::Add: return unit_alpha ? static_cast<T>(x + y) : static_cast<T>(x + alpha * y);
    case BinaryOp::Sub: return unit_alpha ? static_cast<T>(x - y) : static_cast<T>(x - alpha * y);
    case BinaryOp::Mul: return static_cast<T>(x * y);
    case BinaryOp::Div: return static_cast<T>(x / y);
    case BinaryOp::Maximum: return std_max(x, y);
    case BinaryOp::Minimum: return std_min(x, y);
  }
  return x;
}

template <typename T>
__global__ void unary_kernel(StridedIndexer<2> ix, std::int64_t numel, T* out, const T* in, UnaryOp op, T a, T b) {
  for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) {
    std::int64_t off[2];
    ix.offsets(i, off);
    out[off[0]] = apply_unary(op, in[off[1]], a, b);
  }
}

template <typename T>
__global__ void binary_kernel(StridedIndexer<3> ix, std::int64_t numel, T* out, const T* x, const T* y, BinaryOp op,
                              T alpha, bool unit_alpha) {
  for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) {
    std::int64_t off[3];
    ix.offsets(i, off);
    out[off[0]] = apply_binary(op, x[off[1]], y[off[2]], alpha, unit_alpha);
  }
}

template <typename T>
__global__ void ternary_kernel(StridedIndexer<4> ix, std::int64_t numel, T* out, const T* x, const T* y, const T* z,
                               TernaryOp op, T value) {
  for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) {
    std::int64_t off[4];
    ix.offsets(i, off);
    const T xv = x[off[1]], yv = y[off[2]], zv = z[off[3]];
    out[off[0]] = op == TernaryOp::AddCMul ? xv + value * yv * zv : xv + value * yv / zv;
  }
}

}  // namespace

void unary(const Context& ctx, UnaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef in,
           UnaryParams params) {
  if (dtype == DType::Int64 && unary_needs_floating(op)) throw DTypeError("unary op needs a floating-point tensor");
  const std::int64_t numel = shape_numel(sizes);
  if (numel == 0) return;
  const auto ix = make_indexer<2>(sizes, {&out.strides, &in.strides});
  DeviceGuard device(ctx.device);
  cpu::dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    unary_kernel<T><<<grid_for(numel), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        ix, numel, static_cast<T*>(out.data), static_cast<const T*>(in.data), op, static_cast<T>(params.a),
        static_cast<T>(params.b));
    SUBLET_CUDA_LAUNCH_CHECK(unary_kernel);
  });
}

void binary(const Context& ctx, BinaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef a,
            ConstStridedRef b, double alpha) {
  const std::int64_t numel = shape_numel(sizes);
  if (numel == 0) return;
  const auto ix = make_indexer<3>(sizes, {&out.strides, &a.strides, &b.strides});
  DeviceGuard device(ctx.device);
  cpu::dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    binary_kernel<T><<<grid_for(numel), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        ix, numel, static_cast<T*>(out.data), static_cast<const T*>(a.data), static_cast<const T*>(b.data), op,
        static_cast<T>(alpha), alpha == 1.0);
    SUBLET_CUDA_LAUNCH_CHECK(binary_kernel);
  });
}

void ternary(const Context& ctx, TernaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef a,
             ConstStridedRef b, ConstStridedRef c, double value) {
  const std::int64_t numel = shape_numel(sizes);
  const char* name = op == TernaryOp::AddCMul ? "addcmul" : "addcdiv";
  cpu::dispatch_floating(dtype, name, [&](auto tag) {
    using T = decltype(tag);
    if (numel == 0) return;
    const auto ix = make_indexer<4>(sizes, {&out.strides, &a.strides, &b.strides, &c.strides});
    DeviceGuard device(ctx.device);
    ternary_kernel<T><<<grid_for(numel), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        ix, numel, static_cast<T*>(out.data), static_cast<const T*>(a.data), static_cast<const T*>(b.data),
        static_cast<const T*>(c.data), op, static_cast<T>(value));
    SUBLET_CUDA_LAUNCH_CHECK(ternary_kernel);
  });
}

}  // namespace sublet::ops::cuda
