#include "ops/cpu/conv2d_cpu.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>

#include "ops/cpu/im2col_cpu.h"

namespace sublet::ops::cpu {

namespace {

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MatrixMap = Eigen::Map<RowMatrix<T>>;
template <typename T>
using ConstMatrixMap = Eigen::Map<const RowMatrix<T>>;

// Sizes of the per-group GEMMs: weight_g [OCg, K] x col [K, P] = output_g [OCg, P].
struct GemmSizes {
  std::int64_t in_channels_per_group, out_channels_per_group, k, pixels, in_plane_block;
  // 1x1, stride 1, no padding: the input planes already are the column matrix (no im2col).
  bool pointwise;
};

GemmSizes gemm_sizes(const Conv2dShape& s) {
  GemmSizes g{};
  g.in_channels_per_group = s.in_channels / s.groups;
  g.out_channels_per_group = s.out_channels / s.groups;
  g.k = g.in_channels_per_group * s.kernel_h * s.kernel_w;
  g.pixels = s.out_height() * s.out_width();
  g.in_plane_block = g.in_channels_per_group * s.in_height * s.in_width;
  g.pointwise = s.kernel_h == 1 && s.kernel_w == 1 && s.stride_h == 1 && s.stride_w == 1 &&
                s.pad_h == 0 && s.pad_w == 0;
  return g;
}

// One column buffer per thread; none for the pointwise path.
template <typename T>
memory::ScopedBlock column_workspace(const Context& ctx, const GemmSizes& g, int threads) {
  if (g.pointwise) return {};
  return ctx.workspace(static_cast<std::size_t>(threads) * g.k * g.pixels * sizeof(T));
}

}  // namespace

template <typename T>
void conv2d_forward(const Context& ctx, const Conv2dShape& s, const T* input, const T* weight,
                    const T* bias, T* output) {
  const GemmSizes g = gemm_sizes(s);
  const int threads = omp_get_max_threads();
  memory::ScopedBlock columns = column_workspace<T>(ctx, g, threads);
  T* column_base = static_cast<T*>(columns.get());
  const std::int64_t in_image = s.in_channels * s.in_height * s.in_width;
  const std::int64_t out_image = s.out_channels * g.pixels;

#pragma omp parallel num_threads(threads)
  {
    T* col = g.pointwise ? nullptr : column_base + omp_get_thread_num() * g.k * g.pixels;
#pragma omp for schedule(static)
    for (std::int64_t n = 0; n < s.batch; ++n) {
      for (std::int64_t group = 0; group < s.groups; ++group) {
        const T* in_g = input + n * in_image + group * g.in_plane_block;
        if (!g.pointwise) im2col(s, g.in_channels_per_group, in_g, col);
        ConstMatrixMap<T> columns_g(g.pointwise ? in_g : col, g.k, g.pixels);
        ConstMatrixMap<T> weight_g(weight + group * g.out_channels_per_group * g.k,
                                   g.out_channels_per_group, g.k);
        MatrixMap<T> out_g(output + n * out_image + group * g.out_channels_per_group * g.pixels,
                           g.out_channels_per_group, g.pixels);
        out_g.noalias() = weight_g * columns_g;
        if (bias != nullptr) {
          for (std::int64_t oc = 0; oc < g.out_channels_per_group; ++oc) {
            out_g.row(oc).array() += bias[group * g.out_channels_per_group + oc];
          }
        }
      }
    }
  }
}

template <typename T>
void conv2d_backward_input(const Context& ctx, const Conv2dShape& s, const T* grad_output,
                           const T* weight, T* grad_input) {
  const GemmSizes g = gemm_sizes(s);
  const int threads = omp_get_max_threads();
  memory::ScopedBlock columns = column_workspace<T>(ctx, g, threads);
  T* column_base = static_cast<T*>(columns.get());
  const std::int64_t in_image = s.in_channels * s.in_height * s.in_width;
  const std::int64_t out_image = s.out_channels * g.pixels;

#pragma omp parallel num_threads(threads)
  {
    T* col = g.pointwise ? nullptr : column_base + omp_get_thread_num() * g.k * g.pixels;
#pragma omp for schedule(static)
    for (std::int64_t n = 0; n < s.batch; ++n) {
      T* grad_in_n = grad_input + n * in_image;
      if (!g.pointwise) std::fill(grad_in_n, grad_in_n + in_image, T(0));
      for (std::int64_t group = 0; group < s.groups; ++group) {
        ConstMatrixMap<T> weight_g(weight + group * g.out_channels_per_group * g.k,
                                   g.out_channels_per_group, g.k);
        ConstMatrixMap<T> grad_out_g(
            grad_output + n * out_image + group * g.out_channels_per_group * g.pixels,
            g.out_channels_per_group, g.pixels);
        T* grad_in_g = grad_in_n + group * g.in_plane_block;
        MatrixMap<T> grad_columns(g.pointwise ? grad_in_g : col, g.k, g.pixels);
        grad_columns.noalias() = weight_g.transpose() * grad_out_g;
        if (!g.pointwise) col2im_add(s, g.in_channels_per_group, col, grad_in_g);
      }
    }
  }
}

template <typename T>
void conv2d_backward_weight(const Context& ctx, const Conv2dShape& s, const T* grad_output,
                            const T* input, T* grad_weight, T* grad_bias) {
  const GemmSizes g = gemm_sizes(s);
  const int threads = omp_get_max_threads();
  const std::int64_t weight_numel = s.weight_numel();
  // Each thread sums its images' contributions privately, then the partial sums are added:
  // no atomics, and the result does not depend on scheduling beyond float reassociation.
  const std::int64_t partial_numel = weight_numel + s.out_channels;
  memory::ScopedBlock columns = column_workspace<T>(ctx, g, threads);
  memory::ScopedBlock partials =
      ctx.workspace(static_cast<std::size_t>(threads) * partial_numel * sizeof(T));
  T* column_base = static_cast<T*>(columns.get());
  T* partial_base = static_cast<T*>(partials.get());
  std::fill(partial_base, partial_base + threads * partial_numel, T(0));
  const std::int64_t in_image = s.in_channels * s.in_height * s.in_width;
  const std::int64_t out_image = s.out_channels * g.pixels;

#pragma omp parallel num_threads(threads)
  {
    const int thread = omp_get_thread_num();
    T* col = g.pointwise ? nullptr : column_base + thread * g.k * g.pixels;
    T* partial_weight = partial_base + thread * partial_numel;
    T* partial_bias = partial_weight + weight_numel;
#pragma omp for schedule(static)
    for (std::int64_t n = 0; n < s.batch; ++n) {
      for (std::int64_t group = 0; group < s.groups; ++group) {
        const T* in_g = input + n * in_image + group * g.in_plane_block;
        if (!g.pointwise) im2col(s, g.in_channels_per_group, in_g, col);
        ConstMatrixMap<T> columns_g(g.pointwise ? in_g : col, g.k, g.pixels);
        ConstMatrixMap<T> grad_out_g(
            grad_output + n * out_image + group * g.out_channels_per_group * g.pixels,
            g.out_channels_per_group, g.pixels);
        MatrixMap<T> grad_weight_g(partial_weight + group * g.out_channels_per_group * g.k,
                                   g.out_channels_per_group, g.k);
        grad_weight_g.noalias() += grad_out_g * columns_g.transpose();
        if (grad_bias != nullptr) {
          Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>> bias_g(
              partial_bias + group * g.out_channels_per_group, g.out_channels_per_group);
          bias_g += grad_out_g.rowwise().sum();
        }
      }
    }
    // Reduce the partial sums, each thread owning a slice of the result.
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < partial_numel; ++i) {
      T sum = T(0);
      for (int t = 0; t < threads; ++t) sum += partial_base[t * partial_numel + i];
      if (i < weight_numel) {
        grad_weight[i] = sum;
      } else if (grad_bias != nullptr) {
        grad_bias[i - weight_numel] = sum;
      }
    }
  }
}

#define SUBLET_INSTANTIATE_CONV2D_CPU(T)                                                        \
  template void conv2d_forward<T>(const Context&, const Conv2dShape&, const T*, const T*,        \
                                  const T*, T*);                                                 \
  template void conv2d_backward_input<T>(const Context&, const Conv2dShape&, const T*, const T*, \
                                         T*);                                                    \
  template void conv2d_backward_weight<T>(const Context&, const Conv2dShape&, const T*,          \
                                          const T*, T*, T*);
SUBLET_INSTANTIATE_CONV2D_CPU(float)
SUBLET_INSTANTIATE_CONV2D_CPU(double)
#undef SUBLET_INSTANTIATE_CONV2D_CPU

}  // namespace sublet::ops::cpu
