// The weight gradient of a 3x3 stride-1 padding-1 convolution through Winograd F(2x2, 3x3): the
// forward is y = A^T [(G g G^T) . (B^T d B)] A per 2x2 output tile (conv2d_winograd_cpu.cpp), so
// dL/dg = G^T [sum over tiles of (A dy A^T) . (B^T d B)] G. Per position, the sum over tiles is
// [OC x tiles] x [tiles x C]: dot products along the tiles on the AVX-512 weight-gradient tile
// (8 rows x 3 columns, conv2d_avx512_tiles.h), 2.25x fewer multiplies than the direct
// convolution's 9 per pixel.
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "core/errors.h"
#include "ops/cpu/conv2d_avx512_tiles.h"
#include "ops/cpu/conv2d_winograd_cpu.h"
#include "ops/cpu/conv2d_winograd_row_pairs.h"
#include "ops/cpu/conv2d_winograd_transforms.h"

namespace sublet::ops::cpu {

namespace {

using namespace winograd;

// Tiles per work item, about: the tile's horizontal sums (24 per call) are paid once per item,
// so long items; the item's transformed input and output gradient stay in L2 at 16 channels.
constexpr std::int64_t kTargetTilesPerItem = 768;

// One block per item (the dot products run over all of an item's tiles). Items come out a
// multiple of the thread count where they can: ResNet-20's 14x14 stage at 15 images an item made
// 9 items, 5 on one thread and 4 on the other.
Plan weight_plan(const Conv2dShape& s) {
  const std::int64_t tiles_h = (s.in_height + 1) / 2, tiles_per_image = tiles_h * ((s.in_width + 1) / 2);
  const std::int64_t threads = omp_get_max_threads();
  const std::int64_t target = std::max<std::int64_t>(1, kTargetTilesPerItem / tiles_per_image);
  const std::int64_t items_per_thread = std::max<std::int64_t>(1, (s.batch + threads * target - 1) / (threads * target));
  const std::int64_t images = (s.batch + threads * items_per_thread - 1) / (threads * items_per_thread);
  return make_plan(s, images, images * tiles_h);
}

#ifdef SUBLET_WINOGRAD_AVX512

// Mg[position][k][row * tiles_w + tile] = A dy A^T for every tile of the item's tile rows
// [0, rows) of output channel k, A = [[1, 0], [1, 1], [1, -1], [0, -1]]; dy is the 2x2 block of
// grad_output at (2 * tile row, 2 * tile column), zeros past the plane (odd sizes).
SUBLET_WINOGRAD_AVX512 void transform_grad_output_rows(const Plan& p, const float* channel_grad, std::int64_t rows,
                                                       float* mg) {
  const std::int64_t position_stride = p.output_position_stride, out_image = p.out_channels * p.height * p.width;
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512 zero = _mm512_setzero_ps();
  for (std::int64_t tj = 0; tj < p.tiles_w; tj += 16) {
    const __mmask16 store = first_lanes(p.tiles_w - tj);
    const __mmask16 lo = inside_lanes(2 * tj, p.width), hi = inside_lanes(2 * tj + 16, p.width);
    // Tile row and plane counted along (no 64-bit division per row).
    std::int64_t ti = 0;
    const float* plane = channel_grad;
    for (std::int64_t row = 0; row < rows; ++row, ti = ti + 1 == p.tiles_h ? 0 : ti + 1,
                      plane += ti == 0 ? out_image : 0) {
      __m512 e[2][4];  // dy A^T: per gradient row r, the 4 columns a
      for (int r = 0; r < 2; ++r) {
        const std::int64_t y = 2 * ti + r;
        if (y >= p.height) {
          for (int a = 0; a < 4; ++a) e[r][a] = zero;
          continue;
        }
        const float* in = plane + y * p.width + 2 * tj;
        const __m512 l0 = _mm512_maskz_loadu_ps(lo, in), l1 = _mm512_maskz_loadu_ps(hi, in + 16);
        const __m512 q0 = _mm512_permutex2var_ps(l0, even, l1), q1 = _mm512_permutex2var_ps(l0, odd, l1);
        grad_output_row(q0, q1, e[r]);
      }
      float* out = mg + row * p.tiles_w + tj;
      store_grad_output_positions(out, position_stride, store, e);  // A (dy A^T): down the rows
    }
  }
}

#else

void transform_grad_output_rows(const Plan&, const float*, std::int64_t, float*) {
  throw Error("conv2d: the Winograd CPU kernel is not built (needs GCC or Clang on x86-64)");
}

#endif

// g = G^T u G for one (output channel, input channel): u [4][4] the summed products,
// G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]].
void untransform_weight(const double u[4][4], float* g) {
  double t[4][3];  // u G
  for (int b = 0; b < 4; ++b) {
    t[b][0] = u[b][0] + 0.5 * (u[b][1] + u[b][2]);
    t[b][1] = 0.5 * (u[b][1] - u[b][2]);
    t[b][2] = 0.5 * (u[b][1] + u[b][2]) + u[b][3];
  }
  for (int col = 0; col < 3; ++col) {  // G^T (u G)
    g[col] = static_cast<float>(t[0][col] + 0.5 * (t[1][col] + t[2][col]));
    g[3 + col] = static_cast<float>(0.5 * (t[1][col] - t[2][col]));
    g[6 + col] = static_cast<float>(0.5 * (t[1][col] + t[2][col]) + t[3][col]);
  }
}

}  // namespace

void conv2d_backward_weight_winograd(const Context& ctx, const Conv2dShape& s, const float* grad_output,
                                     const float* input, float* grad_weight, float* grad_bias) {
  if (!conv2d_winograd_weight_gradient_applies(s)) {
    throw Error("conv2d: the Winograd CPU weight gradient needs a 3x3 stride-1 padding-1 convolution of one group "
                "with enough channels on an AVX-512 CPU");
  }
  const Plan p = weight_plan(s);
  const std::int64_t transformed_input = kPositions * p.input_position_stride;
  const std::int64_t transformed_grad = kPositions * p.output_position_stride;
  const std::int64_t products = kPositions * p.out_channels * p.channels;  // per item, [position][k][c]
  const std::int64_t partial = products + p.out_channels;                 // and the bias gradient
  // One partial sum per item, not per thread: the schedule is then free to be dynamic (a thread
  // that loses its core, or starts late, does not hold up the other), and the item-order sum at the
  // end is the same whichever thread ran which item.
  memory::ScopedBlock workspace = ctx.workspace(
      sizeof(float) * static_cast<std::size_t>((transformed_input + transformed_grad) * p.threads + partial * p.items));
  float* partial_base = static_cast<float*>(workspace.get());
  float* buffers = partial_base + partial * p.items;
  const std::int64_t plane = p.height * p.width, in_image = p.channels * plane, out_image = p.out_channels * plane;
  const bool pairs = row_pairs(p);  // two tile rows per vector (conv2d_winograd_row_pairs.h)

#pragma omp parallel num_threads(p.threads) if (p.items > 1)
  {
    const int thread = omp_get_thread_num();
    float* v = buffers + thread * (transformed_input + transformed_grad);
    float* mg = v + transformed_input;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t item = 0; item < p.items; ++item) {
      float* sums_of = partial_base + item * partial;
      float* bias_sums = sums_of + products;
      std::fill(sums_of, sums_of + partial, 0.0f);
      const std::int64_t first_image = item * p.images_per_item;
      const std::int64_t images = std::min(p.images_per_item, s.batch - first_image);
      const std::int64_t rows = images * p.tiles_h, tiles = rows * p.tiles_w;
      for (std::int64_t c = 0; c < p.channels; ++c) {
        if (pairs) {
          transform_input_row_pairs(p, input + first_image * in_image + c * plane, 0, rows, rows, v + c * p.stride);
        } else {
          transform_input_rows(p, input + first_image * in_image + c * plane, 0, rows, rows, v + c * p.stride);
        }
      }
      // The tile reads V up to 16-float boundaries; past the tiles it must read finite values
      // (the gradient there is masked to zero, and 0 * NaN is NaN).
      for (std::int64_t position = 0; position < kPositions; ++position) {
        for (std::int64_t c = 0; c < p.channels; ++c) {
          float* row = v + position * p.input_position_stride + c * p.stride;
          std::fill(row + tiles, row + (tiles + 15) / 16 * 16, 0.0f);
        }
      }
      for (std::int64_t k = 0; k < p.out_channels; ++k) {
        if (pairs) {
          transform_grad_output_row_pairs(p, grad_output + first_image * out_image + k * plane, rows, mg + k * p.stride);
        } else {
          transform_grad_output_rows(p, grad_output + first_image * out_image + k * plane, rows, mg + k * p.stride);
        }
      }
      for (std::int64_t position = 0; position < kPositions; ++position) {
        const float* vp = v + position * p.input_position_stride;
        const float* mp = mg + position * p.output_position_stride;
        float* sums_p = sums_of + position * p.out_channels * p.channels;
        for (std::int64_t k = 0; k < p.out_channels; k += kWeightTileRows512) {
          const std::int64_t channels = std::min(kWeightTileRows512, p.out_channels - k);
          const float* grad[kWeightTileRows512];  // a short last tile repeats its last row
          for (std::int64_t j = 0; j < kWeightTileRows512; ++j) grad[j] = mp + (k + std::min(j, channels - 1)) * p.stride;
          for (std::int64_t c = 0; c < p.channels; c += 3) {
            const std::int64_t taps = std::min<std::int64_t>(3, p.channels - c);
            // A short last group of input channels repeats its last one; those sums are dropped.
            const std::int64_t offsets[3] = {c * p.stride, (c + std::min<std::int64_t>(1, taps - 1)) * p.stride,
                                             (c + taps - 1) * p.stride};
            float sums[kWeightTileRows512][3] = {};
            weight_tile_avx512(grad, vp, offsets, tiles, sums);
            for (std::int64_t j = 0; j < channels; ++j) {
              for (std::int64_t i = 0; i < taps; ++i) sums_p[(k + j) * p.channels + c + i] += sums[j][i];
            }
          }
        }
      }
      if (grad_bias == nullptr) continue;
      for (std::int64_t k = 0; k < p.out_channels; ++k) {
        float lanes[16] = {};  // 16 independent sums: one float chain would be latency-bound
        for (std::int64_t i = 0; i < images; ++i) {
          const float* g = grad_output + (first_image + i) * out_image + k * plane;
          std::int64_t x = 0;
          for (; x + 16 <= plane; x += 16) {
            for (int l = 0; l < 16; ++l) lanes[l] += g[x + l];
          }
          for (; x < plane; ++x) lanes[x % 16] += g[x];
        }
        float sum = 0.0f;
        for (const float lane : lanes) sum += lane;
        bias_sums[k] += sum;
      }
    }
    // Add the partial sums in item order and transform back, each thread owning a slice of the
    // (output channel, input channel) pairs.
#pragma omp for schedule(static)
    for (std::int64_t pair = 0; pair < p.out_channels * p.channels; ++pair) {
      double u[4][4];
      for (std::int64_t position = 0; position < kPositions; ++position) {
        const float* at = partial_base + position * p.out_channels * p.channels + pair;
        float sum = 0.0f;
        for (std::int64_t item = 0; item < p.items; ++item) sum += at[item * partial];
        u[position / 4][position % 4] = sum;
      }
      untransform_weight(u, grad_weight + pair * 9);
    }
    if (grad_bias != nullptr) {
#pragma omp for schedule(static)
      for (std::int64_t k = 0; k < p.out_channels; ++k) {
        float sum = 0.0f;
        for (std::int64_t item = 0; item < p.items; ++item) sum += partial_base[item * partial + products + k];
        grad_bias[k] = sum;
      }
    }
  }
}

}  // namespace sublet::ops::cpu
