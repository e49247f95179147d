#include "ops/cpu/conv2d_cpu.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ops/cpu/conv2d_avx2_cpu.h"
#include "ops/cpu/conv2d_avx512_tiles.h"
#include "ops/cpu/conv2d_partial_sums.h"
#include "ops/cpu/conv2d_stride2_cpu.h"
#include "ops/cpu/conv2d_winograd_cpu.h"
#include "ops/cpu/gemm_avx512_cpu.h"
#include "ops/cpu/im2col_cpu.h"

namespace sublet::ops::cpu {

namespace {

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MatrixMap = Eigen::Map<RowMatrix<T>>;
template <typename T>
using ConstMatrixMap = Eigen::Map<const RowMatrix<T>>;

// A GEMM narrower than this many columns (output pixels) runs far below peak, so images with
// few output pixels (the 14x14 and 7x7 stages of a ResNet) are put side by side in one
// column matrix until it is about this wide.
constexpr std::int64_t kTargetGemmColumns = 256;

// c[m x n] (row stride ldc) = a * b (or += when accumulate) through the AVX-512 GEMM, when T is
// float and the CPU has AVX-512; false (nothing done) otherwise, and the caller runs Eigen's
// GEMM of this build. With AVX-512 the GEMMs here are faster than Eigen's.
template <typename T>
bool gemm_fast(std::int64_t m, std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
               bool a_transposed, const T* b, std::int64_t ldb, bool b_transposed, T* c,
               std::int64_t ldc, bool accumulate) {
  if constexpr (std::is_same_v<T, float>) {
    if (gemm_avx512_built() && cpu_has_avx512()) {
      gemm_avx512(m, n, k, {a, lda, a_transposed}, {b, ldb, b_transposed}, c, ldc, accumulate);
      return true;
    }
  }
  (void)m, (void)n, (void)k, (void)a, (void)lda, (void)a_transposed, (void)b, (void)ldb;
  (void)b_transposed, (void)c, (void)ldc, (void)accumulate;
  return false;
}

// How the convolution is cut into GEMMs: per group, weight_g [OCg, K] x col [K, cols] where
// cols = images_per_gemm * pixels.
struct Plan {
  std::int64_t in_channels_per_group, out_channels_per_group, k, pixels;
  std::int64_t group_input_offset;  // elements between the first planes of two groups
  std::int64_t in_image, out_image;  // elements of one image of input / output
  std::int64_t images_per_gemm, chunks;
  // 1x1, stride 1, no padding, one image per GEMM: the input planes already are the column
  // matrix and the output planes the result, so no im2col and no staging copies.
  bool direct;
  // Threads of the batch loop. With a single chunk (batch 1) the loop runs on one thread and
  // Eigen spreads the GEMM itself over the cores (it does not when inside a parallel region).
  int threads;

  std::int64_t max_columns() const { return images_per_gemm * pixels; }
};

Plan make_plan(const Conv2dShape& s) {
  Plan p{};
  p.in_channels_per_group = s.in_channels / s.groups;
  p.out_channels_per_group = s.out_channels / s.groups;
  p.k = p.in_channels_per_group * s.kernel_h * s.kernel_w;
  p.pixels = s.out_height() * s.out_width();
  p.group_input_offset = p.in_channels_per_group * s.in_height * s.in_width;
  p.in_image = s.in_channels * s.in_height * s.in_width;
  p.out_image = s.out_channels * p.pixels;
  p.threads = omp_get_max_threads();
  // Wide enough GEMMs, but never so few chunks that a thread has none.
  const std::int64_t images_per_thread = (s.batch + p.threads - 1) / p.threads;
  p.images_per_gemm = std::clamp<std::int64_t>((kTargetGemmColumns + p.pixels - 1) / p.pixels, 1,
                                               std::max<std::int64_t>(images_per_thread, 1));
  p.chunks = (s.batch + p.images_per_gemm - 1) / p.images_per_gemm;
  const bool pointwise = s.kernel_h == 1 && s.kernel_w == 1 && s.stride_h == 1 &&
                         s.stride_w == 1 && s.pad_h == 0 && s.pad_w == 0;
  p.direct = pointwise && p.images_per_gemm == 1;
  return p;
}

// Per-thread scratch from the allocator (so it shows in the memory statistics): the column
// matrix [K, cols] unless direct, and a staging matrix [OCg, cols] for multi-image GEMMs,
// whose rows interleave images and so cannot alias the NCHW output.
template <typename T>
class Scratch {
 public:
  Scratch(const Context& ctx, const Plan& p)
      : column_elements_(p.direct ? 0 : p.k * p.max_columns()),
        staging_elements_(p.images_per_gemm > 1 ? p.out_channels_per_group * p.max_columns() : 0) {
    const std::size_t per_thread = static_cast<std::size_t>(column_elements_ + staging_elements_);
    if (per_thread > 0) block_ = ctx.workspace(per_thread * p.threads * sizeof(T));
  }
  T* columns(int thread) const { return base() + thread * (column_elements_ + staging_elements_); }
  T* staging(int thread) const { return columns(thread) + column_elements_; }

 private:
  T* base() const { return static_cast<T*>(block_.get()); }
  std::int64_t column_elements_, staging_elements_;
  memory::ScopedBlock block_;
};

// The images [first, first + count) of one GEMM.
struct Chunk {
  std::int64_t first, count;
};
// The images [first, first + count) of one GEMM: the batch spread evenly over the chunks (counts
// differ by at most one, none above images_per_gemm). Filling every chunk but the last left
// ResNet-20's 7x7 weight gradient (22 chunks of 6 images, the last of 2, 11 a thread in the static
// schedule) with 66 images on one thread and 62 on the other.
Chunk chunk_at(const Conv2dShape& s, const Plan& p, std::int64_t index) {
  const std::int64_t first = index * s.batch / p.chunks;
  return {first, (index + 1) * s.batch / p.chunks - first};
}

// The column matrix [K, count * pixels] of group `group` for a chunk: the input itself when
// direct, else im2col of each image into its own block of columns.
template <typename T>
const T* build_columns(const Conv2dShape& s, const Plan& p, const Chunk& c, std::int64_t group,
                       const T* input, T* columns) {
  const T* first_image = input + c.first * p.in_image + group * p.group_input_offset;
  if (p.direct) return first_image;
  const std::int64_t cols = c.count * p.pixels;
  for (std::int64_t b = 0; b < c.count; ++b) {
    im2col(s, p.in_channels_per_group, first_image + b * p.in_image, columns + b * p.pixels, cols);
  }
  return columns;
}

// grad_output of group `group` for a chunk as one [OCg, count * pixels] matrix: in place for a
// single image, else gathered into the staging matrix.
template <typename T>
const T* gather_grad_output(const Plan& p, const Chunk& c, std::int64_t group,
                            const T* grad_output, T* staging) {
  const T* first = grad_output + c.first * p.out_image + group * p.out_channels_per_group * p.pixels;
  if (c.count == 1) return first;
  const std::int64_t cols = c.count * p.pixels;
  for (std::int64_t oc = 0; oc < p.out_channels_per_group; ++oc) {
    for (std::int64_t b = 0; b < c.count; ++b) {
      std::memcpy(staging + oc * cols + b * p.pixels, first + b * p.out_image + oc * p.pixels,
                  p.pixels * sizeof(T));
    }
  }
  return staging;
}

// With stride 1 the input gradient is itself a stride-1 convolution: of grad_output, with the
// kernel flipped, input and output channels swapped, and padding dilation*(kernel-1) - pad on
// each side. Run as a forward convolution it costs an im2col of grad_output (a copy) and a GEMM
// of depth OC*KH*KW into grad_input, instead of a GEMM of depth OC into a column matrix KH*KW
// times the size of grad_input followed by col2im's scatter-add (and a zero-fill before it).
// Below 8 input channels per group the GEMM would have too few rows for Eigen's kernels (a
// single-channel stem is much slower that way), so those keep the col2im path.
bool input_gradient_is_a_convolution(const Conv2dShape& s) {
  return s.in_channels / s.groups >= 8 && s.stride_h == 1 && s.stride_w == 1 &&
         s.pad_h <= s.dilation_h * (s.kernel_h - 1) && s.pad_w <= s.dilation_w * (s.kernel_w - 1);
}

Conv2dShape input_gradient_convolution(const Conv2dShape& s) {
  Conv2dShape t = s;
  t.in_channels = s.out_channels;
  t.in_height = s.out_height();
  t.in_width = s.out_width();
  t.out_channels = s.in_channels;
  t.pad_h = s.dilation_h * (s.kernel_h - 1) - s.pad_h;
  t.pad_w = s.dilation_w * (s.kernel_w - 1) - s.pad_w;
  return t;
}

// flipped[g*Cg + c][oc][kh][kw] = weight[g*OCg + oc][c][KH-1-kh][KW-1-kw]: the weight of
// input_gradient_convolution(s), [C, OC/groups, KH, KW].
template <typename T>
void flip_weight(const Conv2dShape& s, const T* weight, T* flipped) {
  const std::int64_t in_per_group = s.in_channels / s.groups, out_per_group = s.out_channels / s.groups;
  const std::int64_t taps = s.kernel_h * s.kernel_w;
  for (std::int64_t g = 0; g < s.groups; ++g) {
    for (std::int64_t oc = 0; oc < out_per_group; ++oc) {
      for (std::int64_t c = 0; c < in_per_group; ++c) {
        const T* from = weight + ((g * out_per_group + oc) * in_per_group + c) * taps;
        T* to = flipped + ((g * in_per_group + c) * out_per_group + oc) * taps;
        for (std::int64_t tap = 0; tap < taps; ++tap) to[tap] = from[taps - 1 - tap];
      }
    }
  }
}

}  // namespace

template <typename T>
void conv2d_forward(const Context& ctx, const Conv2dShape& s, const T* input, const T* weight,
                    const T* bias, T* output) {
  if constexpr (std::is_same_v<T, float>) {
    if (conv2d_winograd_applies(s)) return conv2d_forward_winograd(ctx, s, input, weight, bias, output);
    if (conv2d_stride2_applies(s)) return conv2d_forward_stride2(ctx, s, input, weight, bias, output);
    if (conv2d_avx2_applies(s)) return conv2d_forward_avx2(ctx, s, input, weight, bias, output);
  }
  const Plan p = make_plan(s);
  Scratch<T> scratch(ctx, p);
#pragma omp parallel num_threads(p.threads) if (p.chunks > 1)
  {
    T* columns = scratch.columns(omp_get_thread_num());
    T* staging = scratch.staging(omp_get_thread_num());
    // Dynamic: output chunks are disjoint, so the result is the same whichever thread runs
    // a chunk, and a thread that loses its core to another process does not hold up the rest.
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t index = 0; index < p.chunks; ++index) {
      const Chunk c = chunk_at(s, p, index);
      const std::int64_t cols = c.count * p.pixels;
      for (std::int64_t group = 0; group < s.groups; ++group) {
        const std::int64_t first_channel = group * p.out_channels_per_group;
        ConstMatrixMap<T> weight_g(weight + first_channel * p.k, p.out_channels_per_group, p.k);
        const T* columns_data = build_columns(s, p, c, group, input, columns);
        ConstMatrixMap<T> columns_g(columns_data, p.k, cols);
        T* out_first = output + c.first * p.out_image + first_channel * p.pixels;
        // weight_g [OCg, K] x columns [K, cols] into out (one image) or staging.
        T* product = c.count == 1 ? out_first : staging;
        if (!gemm_fast<T>(p.out_channels_per_group, cols, p.k, weight + first_channel * p.k, p.k, false,
                          columns_data, cols, false, product, cols, false)) {
          MatrixMap<T>(product, p.out_channels_per_group, cols).noalias() = weight_g * columns_g;
        }
        if (c.count == 1) {
          MatrixMap<T> out_g(out_first, p.out_channels_per_group, p.pixels);
          if (bias != nullptr) {
            for (std::int64_t oc = 0; oc < p.out_channels_per_group; ++oc) {
              out_g.row(oc).array() += bias[first_channel + oc];
            }
          }
          continue;
        }
        // Scatter the interleaved rows back to NCHW, adding the bias on the way.
        for (std::int64_t oc = 0; oc < p.out_channels_per_group; ++oc) {
          const T b = bias != nullptr ? bias[first_channel + oc] : T(0);
          for (std::int64_t image = 0; image < c.count; ++image) {
            const T* from = staging + oc * cols + image * p.pixels;
            T* to = out_first + image * p.out_image + oc * p.pixels;
            for (std::int64_t i = 0; i < p.pixels; ++i) to[i] = from[i] + b;
          }
        }
      }
    }
  }
}

template <typename T>
void conv2d_backward_input(const Context& ctx, const Conv2dShape& s, const T* grad_output,
                           const T* weight, T* grad_input) {
  if constexpr (std::is_same_v<T, float>) {
    if (conv2d_stride2_applies(s)) return conv2d_backward_input_stride2(ctx, s, grad_output, weight, grad_input);
  }
  const Plan p = make_plan(s);
  if (!p.direct && input_gradient_is_a_convolution(s)) {
    memory::ScopedBlock flipped =
        ctx.workspace(static_cast<std::size_t>(s.weight_numel()) * sizeof(T));
    flip_weight(s, weight, static_cast<T*>(flipped.get()));
    conv2d_forward<T>(ctx, input_gradient_convolution(s), grad_output,
                      static_cast<const T*>(flipped.get()), nullptr, grad_input);
    return;
  }
  Scratch<T> scratch(ctx, p);
#pragma omp parallel num_threads(p.threads) if (p.chunks > 1)
  {
    T* columns = scratch.columns(omp_get_thread_num());
    T* staging = scratch.staging(omp_get_thread_num());
    // Dynamic: output chunks are disjoint, so the result is the same whichever thread runs
    // a chunk, and a thread that loses its core to another process does not hold up the rest.
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t index = 0; index < p.chunks; ++index) {
      const Chunk c = chunk_at(s, p, index);
      const std::int64_t cols = c.count * p.pixels;
      T* grad_in_first = grad_input + c.first * p.in_image;
      if (!p.direct) std::fill(grad_in_first, grad_in_first + c.count * p.in_image, T(0));
      for (std::int64_t group = 0; group < s.groups; ++group) {
        ConstMatrixMap<T> weight_g(weight + group * p.out_channels_per_group * p.k,
                                   p.out_channels_per_group, p.k);
        const T* grad_out_data = gather_grad_output(p, c, group, grad_output, staging);
        ConstMatrixMap<T> grad_out_g(grad_out_data, p.out_channels_per_group, cols);
        T* grad_in_g = grad_in_first + group * p.group_input_offset;
        T* grad_columns_data = p.direct ? grad_in_g : columns;
        // weight_g^T [K, OCg] x grad_out [OCg, cols].
        if (!gemm_fast<T>(p.k, cols, p.out_channels_per_group, weight + group * p.out_channels_per_group * p.k,
                          p.k, true, grad_out_data, cols, false, grad_columns_data, cols, false)) {
          MatrixMap<T>(grad_columns_data, p.k, cols).noalias() = weight_g.transpose() * grad_out_g;
        }
        if (p.direct) continue;
        for (std::int64_t b = 0; b < c.count; ++b) {
          col2im_add(s, p.in_channels_per_group, columns + b * p.pixels, cols, grad_in_g + b * p.in_image);
        }
      }
    }
  }
}

template <typename T>
void conv2d_backward_weight(const Context& ctx, const Conv2dShape& s, const T* grad_output,
                            const T* input, T* grad_weight, T* grad_bias) {
  if constexpr (std::is_same_v<T, float>) {
    if (conv2d_winograd_weight_gradient_applies(s)) {
      return conv2d_backward_weight_winograd(ctx, s, grad_output, input, grad_weight, grad_bias);
    }
    if (conv2d_stride2_applies(s)) {
      return conv2d_backward_weight_stride2(ctx, s, grad_output, input, grad_weight, grad_bias);
    }
    // The direct weight-gradient tile, AVX-512 where the CPU has it (8 gradient rows x 3 taps):
    // from 8 input channels it beats im2col + the AVX-512 GEMM (conv_cpu_bench; the AVX2 tile
    // does not). With a single input channel (a stem: 9 taps) the GEMM stays ahead.
    if (conv2d_avx2_weight_gradient_applies(s) && (!cpu_has_avx512() || s.in_channels / s.groups >= 8)) {
      return conv2d_backward_weight_avx2(ctx, s, grad_output, input, grad_weight, grad_bias);
    }
  }
  const Plan p = make_plan(s);
  Scratch<T> scratch(ctx, p);
  // Each thread sums its images' contributions privately, then the partial sums are added:
  // no atomics, and the result does not depend on scheduling beyond float reassociation.
  const std::int64_t weight_numel = s.weight_numel();
  const std::int64_t partial_numel = weight_numel + s.out_channels;
  memory::ScopedBlock partials =
      ctx.workspace(static_cast<std::size_t>(p.threads) * partial_numel * sizeof(T));
  T* partial_base = static_cast<T*>(partials.get());

#pragma omp parallel num_threads(p.threads) if (p.chunks > 1)
  {
    const int thread = omp_get_thread_num();
    T* columns = scratch.columns(thread);
    T* staging = scratch.staging(thread);
    T* partial_weight = partial_base + thread * partial_numel;
    T* partial_bias = partial_weight + weight_numel;
    // The partials are zeroed in the region, each (with the static schedule, when the region has
    // p.threads threads) by the thread that sums into it, rather than all by one thread.
#pragma omp for schedule(static)
    for (int t = 0; t < p.threads; ++t) {
      std::fill(partial_base + t * partial_numel, partial_base + (t + 1) * partial_numel, T(0));
    }
    // Static: which chunks a thread sums must not vary between runs, or the float rounding of
    // the weight gradient would.
#pragma omp for schedule(static)
    for (std::int64_t index = 0; index < p.chunks; ++index) {
      const Chunk c = chunk_at(s, p, index);
      const std::int64_t cols = c.count * p.pixels;
      for (std::int64_t group = 0; group < s.groups; ++group) {
        const T* columns_data = build_columns(s, p, c, group, input, columns);
        const T* grad_out_data = gather_grad_output(p, c, group, grad_output, staging);
        ConstMatrixMap<T> columns_g(columns_data, p.k, cols);
        ConstMatrixMap<T> grad_out_g(grad_out_data, p.out_channels_per_group, cols);
        T* grad_weight_data = partial_weight + group * p.out_channels_per_group * p.k;
        // grad_out [OCg, cols] x columns^T [cols, K], added to the thread's partial sum.
        if (!gemm_fast<T>(p.out_channels_per_group, p.k, cols, grad_out_data, cols, false, columns_data,
                          cols, true, grad_weight_data, p.k, true)) {
          MatrixMap<T>(grad_weight_data, p.out_channels_per_group, p.k).noalias() +=
              grad_out_g * columns_g.transpose();
        }
        if (grad_bias != nullptr) {
          Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>> bias_g(
              partial_bias + group * p.out_channels_per_group, p.out_channels_per_group);
          bias_g += grad_out_g.rowwise().sum();
        }
      }
    }
    write_partial_sums(partial_base, partial_numel, p.threads, weight_numel, grad_weight, grad_bias);
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
