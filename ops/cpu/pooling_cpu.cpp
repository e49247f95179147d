#include "ops/cpu/pooling_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sublet::ops::cpu {

namespace {

// The input rectangle an average-pooling output cell covers, and its divisor.
struct AvgWindow {
  std::int64_t h0, h1, w0, w1;  // clipped to the input: [h0, h1) x [w0, w1)
  double divisor;
};

AvgWindow avg_window(const Pool2dShape& s, std::int64_t oh, std::int64_t ow, bool count_include_pad) {
  std::int64_t h0 = oh * s.stride_h - s.pad_h, w0 = ow * s.stride_w - s.pad_w;
  // PyTorch clips the window to the padded input first: that size is the divisor with padding.
  std::int64_t h1 = std::min(h0 + s.kernel_h, s.in_height + s.pad_h);
  std::int64_t w1 = std::min(w0 + s.kernel_w, s.in_width + s.pad_w);
  const std::int64_t padded_size = (h1 - h0) * (w1 - w0);
  h0 = std::max<std::int64_t>(h0, 0);
  w0 = std::max<std::int64_t>(w0, 0);
  h1 = std::min(h1, s.in_height);
  w1 = std::min(w1, s.in_width);
  const std::int64_t inside_size = (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, static_cast<double>(count_include_pad ? padded_size : inside_size)};
}

std::int64_t adaptive_start(std::int64_t index, std::int64_t in_size, std::int64_t out_size) {
  return (index * in_size) / out_size;
}
std::int64_t adaptive_end(std::int64_t index, std::int64_t in_size, std::int64_t out_size) {
  return ((index + 1) * in_size + out_size - 1) / out_size;
}

}  // namespace

template <typename T>
void max_pool2d_forward(const Pool2dShape& s, const T* input, T* output, std::int64_t* indices) {
  const std::int64_t planes = s.batch * s.channels, oh_count = s.out_height(), ow_count = s.out_width();
  const std::int64_t in_plane = s.in_height * s.in_width, out_plane = oh_count * ow_count;
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < planes; ++p) {
    const T* in = input + p * in_plane;
    for (std::int64_t oh = 0; oh < oh_count; ++oh) {
      for (std::int64_t ow = 0; ow < ow_count; ++ow) {
        T best = -std::numeric_limits<T>::infinity();
        std::int64_t best_index = -1;
        for (std::int64_t kh = 0; kh < s.kernel_h; ++kh) {
          const std::int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
          if (ih < 0 || ih >= s.in_height) continue;
          for (std::int64_t kw = 0; kw < s.kernel_w; ++kw) {
            const std::int64_t iw = ow * s.stride_w - s.pad_w + kw * s.dilation_w;
            if (iw < 0 || iw >= s.in_width) continue;
            const T v = in[ih * s.in_width + iw];
            if (best_index < 0 || v > best || std::isnan(v)) {
              best = v;
              best_index = ih * s.in_width + iw;
              if (std::isnan(v)) break;
            }
          }
          if (std::isnan(best)) break;
        }
        const std::int64_t o = p * out_plane + oh * ow_count + ow;
        output[o] = best;
        indices[o] = best_index;
      }
    }
  }
}

template <typename T>
void max_pool2d_backward(const Pool2dShape& s, const T* grad_output, const std::int64_t* indices,
                         T* grad_input) {
  const std::int64_t planes = s.batch * s.channels;
  const std::int64_t in_plane = s.in_height * s.in_width, out_plane = s.out_height() * s.out_width();
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < planes; ++p) {
    T* grad_in = grad_input + p * in_plane;
    std::fill(grad_in, grad_in + in_plane, T(0));
    for (std::int64_t o = p * out_plane; o < (p + 1) * out_plane; ++o) grad_in[indices[o]] += grad_output[o];
  }
}

template <typename T>
void avg_pool2d_forward(const Pool2dShape& s, const T* input, T* output, bool count_include_pad) {
  const std::int64_t planes = s.batch * s.channels, oh_count = s.out_height(), ow_count = s.out_width();
  const std::int64_t in_plane = s.in_height * s.in_width, out_plane = oh_count * ow_count;
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < planes; ++p) {
    const T* in = input + p * in_plane;
    for (std::int64_t oh = 0; oh < oh_count; ++oh) {
      for (std::int64_t ow = 0; ow < ow_count; ++ow) {
        const AvgWindow w = avg_window(s, oh, ow, count_include_pad);
        T sum = T(0);
        for (std::int64_t ih = w.h0; ih < w.h1; ++ih) {
          for (std::int64_t iw = w.w0; iw < w.w1; ++iw) sum += in[ih * s.in_width + iw];
        }
        output[p * out_plane + oh * ow_count + ow] = static_cast<T>(sum / w.divisor);
      }
    }
  }
}

template <typename T>
void avg_pool2d_backward(const Pool2dShape& s, const T* grad_output, T* grad_input,
                         bool count_include_pad) {
  const std::int64_t planes = s.batch * s.channels, oh_count = s.out_height(), ow_count = s.out_width();
  const std::int64_t in_plane = s.in_height * s.in_width, out_plane = oh_count * ow_count;
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < planes; ++p) {
    T* grad_in = grad_input + p * in_plane;
    std::fill(grad_in, grad_in + in_plane, T(0));
    for (std::int64_t oh = 0; oh < oh_count; ++oh) {
      for (std::int64_t ow = 0; ow < ow_count; ++ow) {
        const AvgWindow w = avg_window(s, oh, ow, count_include_pad);
        const T share = static_cast<T>(grad_output[p * out_plane + oh * ow_count + ow] / w.divisor);
        for (std::int64_t ih = w.h0; ih < w.h1; ++ih) {
          for (std::int64_t iw = w.w0; iw < w.w1; ++iw) grad_in[ih * s.in_width + iw] += share;
        }
      }
    }
  }
}

template <typename T>
void adaptive_avg_pool2d_forward(const AdaptivePool2dShape& s, const T* input, T* output) {
  const std::int64_t planes = s.batch * s.channels;
  const std::int64_t in_plane = s.in_height * s.in_width, out_plane = s.out_height * s.out_width;
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < planes; ++p) {
    const T* in = input + p * in_plane;
    for (std::int64_t oh = 0; oh < s.out_height; ++oh) {
      const std::int64_t h0 = adaptive_start(oh, s.in_height, s.out_height);
      const std::int64_t h1 = adaptive_end(oh, s.in_height, s.out_height);
      for (std::int64_t ow = 0; ow < s.out_width; ++ow) {
        const std::int64_t w0 = adaptive_start(ow, s.in_width, s.out_width);
        const std::int64_t w1 = adaptive_end(ow, s.in_width, s.out_width);
        T sum = T(0);
        for (std::int64_t ih = h0; ih < h1; ++ih) {
          for (std::int64_t iw = w0; iw < w1; ++iw) sum += in[ih * s.in_width + iw];
        }
        output[p * out_plane + oh * s.out_width + ow] = sum / static_cast<T>((h1 - h0) * (w1 - w0));
      }
    }
  }
}

template <typename T>
void adaptive_avg_pool2d_backward(const AdaptivePool2dShape& s, const T* grad_output, T* grad_input) {
  const std::int64_t planes = s.batch * s.channels;
  const std::int64_t in_plane = s.in_height * s.in_width, out_plane = s.out_height * s.out_width;
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < planes; ++p) {
    T* grad_in = grad_input + p * in_plane;
    std::fill(grad_in, grad_in + in_plane, T(0));
    for (std::int64_t oh = 0; oh < s.out_height; ++oh) {
      const std::int64_t h0 = adaptive_start(oh, s.in_height, s.out_height);
      const std::int64_t h1 = adaptive_end(oh, s.in_height, s.out_height);
      for (std::int64_t ow = 0; ow < s.out_width; ++ow) {
        const std::int64_t w0 = adaptive_start(ow, s.in_width, s.out_width);
        const std::int64_t w1 = adaptive_end(ow, s.in_width, s.out_width);
        const T share = grad_output[p * out_plane + oh * s.out_width + ow] /
                        static_cast<T>((h1 - h0) * (w1 - w0));
        for (std::int64_t ih = h0; ih < h1; ++ih) {
          for (std::int64_t iw = w0; iw < w1; ++iw) grad_in[ih * s.in_width + iw] += share;
        }
      }
    }
  }
}

#define SUBLET_INSTANTIATE_POOLING_CPU(T)                                                            \
  template void max_pool2d_forward<T>(const Pool2dShape&, const T*, T*, std::int64_t*);             \
  template void max_pool2d_backward<T>(const Pool2dShape&, const T*, const std::int64_t*, T*);      \
  template void avg_pool2d_forward<T>(const Pool2dShape&, const T*, T*, bool);                      \
  template void avg_pool2d_backward<T>(const Pool2dShape&, const T*, T*, bool);                     \
  template void adaptive_avg_pool2d_forward<T>(const AdaptivePool2dShape&, const T*, T*);           \
  template void adaptive_avg_pool2d_backward<T>(const AdaptivePool2dShape&, const T*, T*);
SUBLET_INSTANTIATE_POOLING_CPU(float)
SUBLET_INSTANTIATE_POOLING_CPU(double)
#undef SUBLET_INSTANTIATE_POOLING_CPU

}  // namespace sublet::ops::cpu
