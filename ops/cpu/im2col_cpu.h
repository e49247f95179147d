#pragma once
// im2col / col2im for one image. The column matrix has one row per (channel, kh, kw) and one
// column per output pixel, so that conv becomes weight[OC, C*KH*KW] x col[C*KH*KW, OH*OW].
#include <algorithm>
#include <cstdint>

#include "ops/conv2d.h"

namespace sublet::ops::cpu {

// Output columns [first, last) of one output row read input columns that lie inside
// [0, width) when the row's input offset is `offset`: ow * stride + offset in [0, width).
struct InsideRange {
  std::int64_t first, last;
};
inline InsideRange inside_columns(std::int64_t offset, std::int64_t stride, std::int64_t width,
                                  std::int64_t out_width) {
  const std::int64_t first =
      offset >= 0 ? 0 : std::min<std::int64_t>((-offset + stride - 1) / stride, out_width);
  const std::int64_t last = offset >= width
                                ? first
                                : std::clamp<std::int64_t>((width - 1 - offset) / stride + 1, first, out_width);
  return {first, last};
}

// Zeroes [p, p + n). Padding margins are mostly 0 or 1 values wide, and a fill of one float
// compiles to a memset call: for ResNet shapes that call cost more than the copies around it.
template <typename T>
inline void zero_margin(T* p, std::int64_t n) {
  if (n > 2) {
    std::fill(p, p + n, T(0));
    return;
  }
  if (n > 0) p[0] = T(0);
  if (n > 1) p[1] = T(0);
}

// Stride 1 with the output as wide as the input (a "same" convolution): output pixel p of the
// kernel row (kh, kw) reads input pixel p + shift of its plane, shift = (kh*dh - ph)*W +
// (kw*dw - pw). So a whole kernel row is one contiguous copy (or add) of pixels [first, last),
// except the columns that wrapped into a neighbouring input row: those read padding.
struct FlatShift {
  std::int64_t shift, first, last;
  std::int64_t wrapped_first, wrapped_last;  // columns of every output row that read padding
};

inline bool flat_shift_applies(const Conv2dShape& s) {
  return s.stride_h == 1 && s.stride_w == 1 && s.out_width() == s.in_width;
}

// `out_height` is passed in: Conv2dShape::out_height() is out of line with a division, and
// these run once per row of the column matrix of every image.
inline FlatShift flat_shift(const Conv2dShape& s, std::int64_t out_height, std::int64_t kh, std::int64_t kw) {
  const std::int64_t width = s.in_width, pixels = out_height * width, plane = s.in_height * width;
  const std::int64_t shift_w = kw * s.dilation_w - s.pad_w;
  FlatShift f{};
  f.shift = (kh * s.dilation_h - s.pad_h) * width + shift_w;
  f.first = std::clamp<std::int64_t>(-f.shift, 0, pixels);
  f.last = std::clamp<std::int64_t>(plane - f.shift, f.first, pixels);
  f.wrapped_first = shift_w < 0 ? 0 : std::max<std::int64_t>(width - shift_w, 0);
  f.wrapped_last = shift_w < 0 ? std::min(-shift_w, width) : width;
  return f;
}

template <typename T>
void zero_wrapped_columns(const Conv2dShape& s, std::int64_t out_height, const FlatShift& f, T* row) {
  if (f.wrapped_first >= f.wrapped_last) return;
  if (f.wrapped_last - f.wrapped_first == 1) {
    // The usual case (a 3x3 kernel with padding 1): one value per output row. Plain stores;
    // a fill per row would be a memset call for a single float.
    for (std::int64_t oh = 0; oh < out_height; ++oh) row[oh * s.in_width + f.wrapped_first] = T(0);
    return;
  }
  for (std::int64_t oh = 0; oh < out_height; ++oh, row += s.in_width) {
    std::fill(row + f.wrapped_first, row + f.wrapped_last, T(0));
  }
}

// col[(c*KH + kh)*KW + kw][oh*OW + ow] = input[c][oh*sh - ph + kh*dh][ow*sw - pw + kw*dw] or 0.
// Row r of the column matrix starts at col + r * row_stride: a stride larger than OH*OW lets
// several images share one column matrix side by side (one wider GEMM for small images).
template <typename T>
void im2col(const Conv2dShape& s, std::int64_t channels, const T* input, T* col_matrix,
            std::int64_t row_stride) {
  const std::int64_t oh_count = s.out_height(), ow_count = s.out_width();
  const bool flat = flat_shift_applies(s);
  std::int64_t row_index = 0;
  for (std::int64_t c = 0; c < channels; ++c) {
    const T* plane = input + c * s.in_height * s.in_width;
    for (std::int64_t kh = 0; kh < s.kernel_h; ++kh) {
      for (std::int64_t kw = 0; kw < s.kernel_w; ++kw, ++row_index) {
        const std::int64_t col_offset = kw * s.dilation_w - s.pad_w;
        T* col = col_matrix + row_index * row_stride;
        if (flat) {
          const FlatShift f = flat_shift(s, oh_count, kh, kw);
          std::fill(col, col + f.first, T(0));
          std::copy(plane + f.first + f.shift, plane + f.last + f.shift, col + f.first);
          std::fill(col + f.last, col + oh_count * ow_count, T(0));
          zero_wrapped_columns(s, oh_count, f, col);
          continue;
        }
        const InsideRange r = inside_columns(col_offset, s.stride_w, s.in_width, ow_count);
        for (std::int64_t oh = 0; oh < oh_count; ++oh, col += ow_count) {
          const std::int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
          if (ih < 0 || ih >= s.in_height) {
            std::fill(col, col + ow_count, T(0));
            continue;
          }
          const T* row = plane + ih * s.in_width;
          zero_margin(col, r.first);
          if (s.stride_w == 1) {  // one contiguous copy between the zero margins
            std::copy(row + r.first + col_offset, row + r.last + col_offset, col + r.first);
          } else if (s.stride_w == 2) {  // a constant stride: the compiler vectorises the gather
            const T* from = row + col_offset;
            for (std::int64_t ow = r.first; ow < r.last; ++ow) col[ow] = from[2 * ow];
          } else {
            for (std::int64_t ow = r.first; ow < r.last; ++ow) col[ow] = row[ow * s.stride_w + col_offset];
          }
          zero_margin(col + r.last, ow_count - r.last);
        }
      }
    }
  }
}

// The adjoint of im2col: input[c][ih][iw] += every col entry that im2col read from it.
// `input` must be initialised (usually zeroed) by the caller; row_stride as for im2col.
// The column matrix is scratch: entries that im2col would have read from padding may be zeroed.
template <typename T>
void col2im_add(const Conv2dShape& s, std::int64_t channels, T* col_matrix,
                std::int64_t row_stride, T* input) {
  const std::int64_t oh_count = s.out_height(), ow_count = s.out_width();
  const bool flat = flat_shift_applies(s);
  std::int64_t row_index = 0;
  for (std::int64_t c = 0; c < channels; ++c) {
    T* plane = input + c * s.in_height * s.in_width;
    for (std::int64_t kh = 0; kh < s.kernel_h; ++kh) {
      for (std::int64_t kw = 0; kw < s.kernel_w; ++kw, ++row_index) {
        const std::int64_t col_offset = kw * s.dilation_w - s.pad_w;
        T* col = col_matrix + row_index * row_stride;
        if (flat) {
          // Zeroing the wrapped entries first lets one contiguous add cover the whole row:
          // they then add exactly nothing to the neighbouring row's edge pixels.
          const FlatShift f = flat_shift(s, oh_count, kh, kw);
          zero_wrapped_columns(s, oh_count, f, col);
          for (std::int64_t p = f.first; p < f.last; ++p) plane[p + f.shift] += col[p];
          continue;
        }
        const InsideRange r = inside_columns(col_offset, s.stride_w, s.in_width, ow_count);
        for (std::int64_t oh = 0; oh < oh_count; ++oh, col += ow_count) {
          const std::int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
          if (ih < 0 || ih >= s.in_height) continue;
          T* row = plane + ih * s.in_width;
          for (std::int64_t ow = r.first; ow < r.last; ++ow) row[ow * s.stride_w + col_offset] += col[ow];
        }
      }
    }
  }
}

}  // namespace sublet::ops::cpu
