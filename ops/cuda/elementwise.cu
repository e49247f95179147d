// Element-wise kernels, two per (dtype, arity):
//  - the dense kernel, the fast path (chosen by plan_dense, elementwise_plan.h): every operand is
//    dense in the output's layout or one broadcast element, and 16-byte aligned. Each thread
//    moves 16 bytes per operand with one vector load/store (float4, double2, 2 x int64) and does
//    no index arithmetic; the last numel % width elements are done one per thread at the end.
//  - binary ops only: the row kernel (plan_rows, elementwise_plan.h) for [rows, cols] layouts
//    with dense 16-byte aligned rows: a bias broadcast along the rows, one value per row, a
//    narrowed view; 16 bytes per operand and access, one fast division per thread.
//  - the strided kernel (StridedIndexer) for every other layout: broadcast channels, strided or
//    transposed views, base pointers off the 16-byte boundary.
// The op is a run-time argument, switched on once per thread before the element loop: each case
// runs its own copy of the loop with the formula inlined, so the loop holds no branch on the op
// and the number of kernels (and nvcc time) stays small. Each formula is the CPU kernel's,
// written with the same operation order so that results agree to the last bits where the
// device math library does (see the tolerances in tests/ops/test_cuda_elementwise.cpp).
// bfloat16 and float16 are storage types: each element is loaded, converted to float32, the
// formula runs in float32 (scalars too, as PyTorch's opmath), and the result is rounded once to
// 16 bits on the store (ops/cuda/half_types.cuh; tests/ops/test_cuda_half_elementwise.cpp). The
// dense kernel moves 8 of them per 16-byte access. For the other dtypes load and store are the
// identity, so their code is what it was.
#include <algorithm>
#include <array>
#include <type_traits>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cuda/cuda_checks.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/device_math.cuh"
#include "ops/cuda/elementwise_cuda.h"
#include "ops/cuda/elementwise_plan.h"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/int_divider.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/strided_indexer.cuh"

namespace sublet::ops::cuda {
namespace {

// Calls body(f) with f the element function of `op`: one instantiation of body per op.
template <typename T, typename Body>
__device__ void with_unary(UnaryOp op, T a, T b, Body&& body) {
  switch (op) {
    case UnaryOp::Neg: return body([](T x) { return static_cast<T>(-x); });
    case UnaryOp::Relu: return body([](T x) { return x > T(0) ? x : T(0); });
    case UnaryOp::AddScalar: return body([a](T x) { return static_cast<T>(x + a); });
    case UnaryOp::MulScalar: return body([a](T x) { return static_cast<T>(x * a); });
    case UnaryOp::DivScalar: return body([a](T x) { return static_cast<T>(x / a); });
    case UnaryOp::Clamp: return body([a, b](T x) { return std_min(std_max(x, a), b); });
    case UnaryOp::Positive: return body([](T x) { return x > T(0) ? T(1) : T(0); });
    case UnaryOp::InRange: return body([a, b](T x) { return (x >= a && x <= b) ? T(1) : T(0); });
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case UnaryOp::Exp: return body([](T x) { return device_exp(x); });
      case UnaryOp::Log: return body([](T x) { return device_log(x); });
      case UnaryOp::Sqrt: return body([](T x) { return device_sqrt(x); });
      case UnaryOp::Pow:
        if (a == T(2)) return body([](T x) { return x * x; });
        return body([a](T x) { return device_pow(x, a); });
      case UnaryOp::Sigmoid: return body([](T x) { return T(1) / (T(1) + device_exp(-x)); });
      case UnaryOp::Tanh: return body([](T x) { return device_tanh(x); });
      default: break;
    }
  }
  // Not reached: the host refuses float-only ops on integers before launching.
}

template <typename T, typename Body>
__device__ void with_binary(BinaryOp op, T alpha, bool unit_alpha, Body&& body) {
  switch (op) {
    case BinaryOp::Add:
      if (unit_alpha) return body([](T x, T y) { return static_cast<T>(x + y); });
      return body([alpha](T x, T y) { return static_cast<T>(x + alpha * y); });
    case BinaryOp::Sub:
      if (unit_alpha) return body([](T x, T y) { return static_cast<T>(x - y); });
      return body([alpha](T x, T y) { return static_cast<T>(x - alpha * y); });
    case BinaryOp::Mul: return body([](T x, T y) { return static_cast<T>(x * y); });
    case BinaryOp::Div: return body([](T x, T y) { return static_cast<T>(x / y); });
    case BinaryOp::Maximum: return body([](T x, T y) { return std_max(x, y); });
    case BinaryOp::Minimum: return body([](T x, T y) { return std_min(x, y); });
    case BinaryOp::Equal: return body([](T x, T y) { return x == y ? T(1) : T(0); });
    case BinaryOp::ReluBackward: return body([](T g, T y) { return y > T(0) ? g : T(0); });
  }
}

template <typename T, typename Body>
__device__ void with_ternary(TernaryOp op, T value, Body&& body) {
  if (op == TernaryOp::AddCMul) return body([value](T x, T y, T z) { return x + value * y * z; });
  return body([value](T x, T y, T z) { return x + value * y / z; });
}

// ---- dense kernel ----------------------------------------------------------------------------

// V elements moved by one vector instruction (alignas makes the load ld.global.v4.f32 & co).
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <typename T>
inline constexpr int kPackWidth = static_cast<int>(kVectorBytes / sizeof(T));

template <typename T, int NIn>
struct DenseInputs {
  const T* data[NIn];
  bool scalar[NIn];  // one element broadcast to every position: data[k][0]
};

// f on element j of each input, in the compute type, stored back as T.
template <typename F, typename T, int V, int NIn>
__device__ T apply_at(const F& f, const Pack<T, V> (&x)[NIn], int j) {
  if constexpr (NIn == 1) {
    return store_compute<T>(f(load_compute(x[0].v[j])));
  } else if constexpr (NIn == 2) {
    return store_compute<T>(f(load_compute(x[0].v[j]), load_compute(x[1].v[j])));
  } else {
    static_assert(NIn == 3);
    return store_compute<T>(f(load_compute(x[0].v[j]), load_compute(x[1].v[j]), load_compute(x[2].v[j])));
  }
}

// out[i] = f(in[i]...) for i < numel; out and the dense inputs are V-element aligned.
template <int V, typename T, int NIn, typename F>
__device__ void dense_loop(std::int64_t numel, T* out, const DenseInputs<T, NIn>& in, const F& f) {
  const std::int64_t packs = numel / V;
  // The grid covers every pack up to 2^28 of them, so this loop runs once: unrolling it would
  // only add a trip-count division to every thread.
#pragma unroll 1
  for (std::int64_t p = global_thread_index(); p < packs; p += grid_threads()) {
    const std::int64_t first = p * V;
    Pack<T, V> x[NIn];
#pragma unroll
    for (int k = 0; k < NIn; ++k) {
      if (in.scalar[k]) {
        const T s = in.data[k][0];
#pragma unroll
        for (int j = 0; j < V; ++j) x[k].v[j] = s;
      } else {
        x[k] = *reinterpret_cast<const Pack<T, V>*>(in.data[k] + first);
      }
    }
    Pack<T, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = apply_at(f, x, j);
    *reinterpret_cast<Pack<T, V>*>(out + first) = y;
  }
  // The numel % V elements after the last whole pack: one each for the grid's first threads.
  const std::int64_t i = packs * V + global_thread_index();
  if (i < numel) {
    Pack<T, 1> x[NIn];
#pragma unroll
    for (int k = 0; k < NIn; ++k) x[k].v[0] = in.scalar[k] ? in.data[k][0] : in.data[k][i];
    out[i] = apply_at(f, x, 0);
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    unary_dense_kernel(std::int64_t numel, T* out, DenseInputs<T, 1> in, UnaryOp op, ComputeType<T> a,
                       ComputeType<T> b) {
  with_unary<ComputeType<T>>(op, a, b, [&](const auto& f) { dense_loop<kPackWidth<T>>(numel, out, in, f); });
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    binary_dense_kernel(std::int64_t numel, T* out, DenseInputs<T, 2> in, BinaryOp op, ComputeType<T> alpha,
                        bool unit_alpha) {
  with_binary<ComputeType<T>>(op, alpha, unit_alpha,
                              [&](const auto& f) { dense_loop<kPackWidth<T>>(numel, out, in, f); });
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    ternary_dense_kernel(std::int64_t numel, T* out, DenseInputs<T, 3> in, TernaryOp op, ComputeType<T> value) {
  with_ternary<ComputeType<T>>(op, value, [&](const auto& f) { dense_loop<kPackWidth<T>>(numel, out, in, f); });
}

// Enough threads for one pack each (the loop strides beyond kMaxBlocks blocks); the tail, fewer
// than one pack's elements, falls to the first block's first threads.
template <typename T>
unsigned dense_grid(std::int64_t numel) {
  return grid_for(std::max<std::int64_t>(numel / kPackWidth<T>, 1));
}

template <typename T, int N>
DenseInputs<T, N - 1> dense_inputs(const DensePlan<N>& plan, const std::array<const void*, std::size_t{N}>& data) {
  DenseInputs<T, N - 1> in{};
  for (int k = 1; k < N; ++k) {
    in.data[k - 1] = static_cast<const T*>(data[k]);
    in.scalar[k - 1] = plan.scalar[k];
  }
  return in;
}

// ---- row kernel ------------------------------------------------------------------------------

template <typename T, int NIn>
struct RowInputs {
  const T* data[NIn];
  std::int64_t row_stride[NIn];
  bool per_row[NIn];  // one element per row (a value broadcast along the row)
};

// out[r, c] = f(in[r, c]...) over [rows, cols] with V | cols: one vector per operand and thread.
template <int V, typename T, int NIn, typename F>
__device__ void row_loop(std::int64_t packs, IntDivider packs_per_row, T* out, std::int64_t out_row_stride,
                         const RowInputs<T, NIn>& in, const F& f) {
#pragma unroll 1
  for (std::int64_t p = global_thread_index(); p < packs; p += grid_threads()) {
    std::uint32_t row, col_pack;
    packs_per_row.divmod(static_cast<std::uint32_t>(p), row, col_pack);
    const std::int64_t col = static_cast<std::int64_t>(col_pack) * V;
    Pack<T, V> x[NIn];
#pragma unroll
    for (int k = 0; k < NIn; ++k) {
      const T* base = in.data[k] + row * in.row_stride[k];
      if (in.per_row[k]) {
        const T s = base[0];
#pragma unroll
        for (int j = 0; j < V; ++j) x[k].v[j] = s;
      } else {
        x[k] = *reinterpret_cast<const Pack<T, V>*>(base + col);
      }
    }
    Pack<T, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = apply_at(f, x, j);
    *reinterpret_cast<Pack<T, V>*>(out + row * out_row_stride + col) = y;
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    binary_row_kernel(std::int64_t packs, IntDivider packs_per_row, T* out, std::int64_t out_row_stride,
                      RowInputs<T, 2> in, BinaryOp op, ComputeType<T> alpha, bool unit_alpha) {
  with_binary<ComputeType<T>>(op, alpha, unit_alpha, [&](const auto& f) {
    row_loop<kPackWidth<T>>(packs, packs_per_row, out, out_row_stride, in, f);
  });
}

template <typename T, int N>
RowInputs<T, N - 1> row_inputs(const RowPlan<N>& plan, const std::array<const void*, std::size_t{N}>& data) {
  RowInputs<T, N - 1> in{};
  for (int k = 1; k < N; ++k) {
    in.data[k - 1] = static_cast<const T*>(data[k]);
    in.row_stride[k - 1] = plan.row_stride[k];
    in.per_row[k - 1] = plan.per_row[k];
  }
  return in;
}

// ---- strided kernel --------------------------------------------------------------------------

template <typename T>
__global__ void unary_kernel(const __grid_constant__ StridedIndexer<2> ix, std::int64_t numel, T* out, const T* in,
                             UnaryOp op, ComputeType<T> a, ComputeType<T> b) {
  with_unary<ComputeType<T>>(op, a, b, [&](const auto& f) {
#pragma unroll 1
    for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) {
      std::int64_t off[2];
      ix.offsets(i, off);
      out[off[0]] = store_compute<T>(f(load_compute(in[off[1]])));
    }
  });
}

template <typename T>
__global__ void binary_kernel(const __grid_constant__ StridedIndexer<3> ix, std::int64_t numel, T* out, const T* x,
                              const T* y, BinaryOp op, ComputeType<T> alpha, bool unit_alpha) {
  with_binary<ComputeType<T>>(op, alpha, unit_alpha, [&](const auto& f) {
#pragma unroll 1
    for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) {
      std::int64_t off[3];
      ix.offsets(i, off);
      out[off[0]] = store_compute<T>(f(load_compute(x[off[1]]), load_compute(y[off[2]])));
    }
  });
}

template <typename T>
__global__ void ternary_kernel(const __grid_constant__ StridedIndexer<4> ix, std::int64_t numel, T* out, const T* x,
                               const T* y, const T* z, TernaryOp op, ComputeType<T> value) {
  with_ternary<ComputeType<T>>(op, value, [&](const auto& f) {
#pragma unroll 1
    for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) {
      std::int64_t off[4];
      ix.offsets(i, off);
      out[off[0]] = store_compute<T>(f(load_compute(x[off[1]]), load_compute(y[off[2]]), load_compute(z[off[3]])));
    }
  });
}

}  // namespace

void unary(const Context& ctx, UnaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef in,
           UnaryParams params) {
  if (dtype == DType::Int64 && unary_needs_floating(op)) throw DTypeError("unary op needs a floating-point tensor");
  const std::int64_t numel = shape_numel(sizes);
  if (numel == 0) return;
  const std::array<const void*, 2> data{out.data, in.data};
  const auto plan = plan_dense<2>(sizes, {&out.strides, &in.strides}, data, element_size(dtype));
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  dispatch_device_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    const C a = static_cast<C>(params.a), b = static_cast<C>(params.b);
    if (plan.dense) {
      unary_dense_kernel<T><<<dense_grid<T>(numel), kBlockThreads, 0, stream>>>(
          numel, static_cast<T*>(out.data), dense_inputs<T>(plan, data), op, a, b);
      SUBLET_CUDA_LAUNCH_CHECK(unary_dense_kernel);
      return;
    }
    const auto ix = make_indexer<2>(sizes, {&out.strides, &in.strides});
    unary_kernel<T><<<grid_for(numel), kBlockThreads, 0, stream>>>(ix, numel, static_cast<T*>(out.data),
                                                                   static_cast<const T*>(in.data), op, a, b);
    SUBLET_CUDA_LAUNCH_CHECK(unary_kernel);
  });
}

void binary(const Context& ctx, BinaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef a,
            ConstStridedRef b, double alpha) {
  const std::int64_t numel = shape_numel(sizes);
  if (numel == 0) return;
  const std::array<const void*, 3> data{out.data, a.data, b.data};
  const auto plan = plan_dense<3>(sizes, {&out.strides, &a.strides, &b.strides}, data, element_size(dtype));
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  dispatch_device_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    if (plan.dense) {
      binary_dense_kernel<T><<<dense_grid<T>(numel), kBlockThreads, 0, stream>>>(
          numel, static_cast<T*>(out.data), dense_inputs<T>(plan, data), op, static_cast<C>(alpha), alpha == 1.0);
      SUBLET_CUDA_LAUNCH_CHECK(binary_dense_kernel);
      return;
    }
    const auto rows = plan_rows<3>(sizes, {&out.strides, &a.strides, &b.strides}, data, sizeof(T));
    if (rows.applies) {
      const std::int64_t packs_per_row = rows.cols / kPackWidth<T>, packs = rows.rows * packs_per_row;
      binary_row_kernel<T><<<grid_for(packs), kBlockThreads, 0, stream>>>(
          packs, IntDivider(packs_per_row), static_cast<T*>(out.data), rows.row_stride[0], row_inputs<T>(rows, data),
          op, static_cast<C>(alpha), alpha == 1.0);
      SUBLET_CUDA_LAUNCH_CHECK(binary_row_kernel);
      return;
    }
    const auto ix = make_indexer<3>(sizes, {&out.strides, &a.strides, &b.strides});
    binary_kernel<T><<<grid_for(numel), kBlockThreads, 0, stream>>>(
        ix, numel, static_cast<T*>(out.data), static_cast<const T*>(a.data), static_cast<const T*>(b.data), op,
        static_cast<C>(alpha), alpha == 1.0);
    SUBLET_CUDA_LAUNCH_CHECK(binary_kernel);
  });
}

void ternary(const Context& ctx, TernaryOp op, DType dtype, const Shape& sizes, StridedRef out, ConstStridedRef a,
             ConstStridedRef b, ConstStridedRef c, double value) {
  const std::int64_t numel = shape_numel(sizes);
  const char* name = op == TernaryOp::AddCMul ? "addcmul" : "addcdiv";
  dispatch_device_floating(dtype, name, [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    if (numel == 0) return;
    const std::array<const void*, 4> data{out.data, a.data, b.data, c.data};
    const auto plan = plan_dense<4>(sizes, {&out.strides, &a.strides, &b.strides, &c.strides}, data, sizeof(T));
    memory::CudaDeviceGuard device(ctx.device);
    const cudaStream_t stream = stream_of(ctx.stream);
    if (plan.dense) {
      ternary_dense_kernel<T><<<dense_grid<T>(numel), kBlockThreads, 0, stream>>>(
          numel, static_cast<T*>(out.data), dense_inputs<T>(plan, data), op, static_cast<C>(value));
      SUBLET_CUDA_LAUNCH_CHECK(ternary_dense_kernel);
      return;
    }
    const auto ix = make_indexer<4>(sizes, {&out.strides, &a.strides, &b.strides, &c.strides});
    ternary_kernel<T><<<grid_for(numel), kBlockThreads, 0, stream>>>(
        ix, numel, static_cast<T*>(out.data), static_cast<const T*>(a.data), static_cast<const T*>(b.data),
        static_cast<const T*>(c.data), op, static_cast<C>(value));
    SUBLET_CUDA_LAUNCH_CHECK(ternary_kernel);
  });
}

}  // namespace sublet::ops::cuda
