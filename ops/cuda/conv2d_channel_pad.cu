// The channel padding of ops/cuda/conv2d_channel_pad.h: which convolutions take it, and the two
// copies (widen a [rows, C] buffer to [rows, P] with zeros; narrow [rows, P] back to [rows, C]).
// The copies move 2-byte elements as bits: one thread per row, the padded side as one 8- or
// 16-byte vector, the narrow side as C scalar accesses (its rows are 2C bytes, unaligned).
#include "ops/cuda/conv2d_channel_pad.h"

#include <cstdint>
#include <string>

#include "core/errors.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/conv2d_single_tap.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/stream.h"

namespace sublet::ops::cuda {
namespace {

// The largest channel count that is padded: cuDNN's NHWC kernels take 8 channels as they are.
constexpr std::int64_t kMaxNarrowChannels = 8;

// A padded row: P 2-byte values stored as one 8-byte (P = 4) or 16-byte (P = 8) vector.
template <int P>
struct alignas(2 * P) PaddedRow {
  std::uint16_t v[P];
};

template <int P>
__global__ void widen_kernel(const std::uint16_t* __restrict__ src, std::int64_t rows, int channels,
                             PaddedRow<P>* __restrict__ dst) {
  for (std::int64_t row = global_thread_index(); row < rows; row += grid_threads()) {
    PaddedRow<P> out;
#pragma unroll
    for (int c = 0; c < P; ++c) out.v[c] = c < channels ? src[row * channels + c] : std::uint16_t{0};
    dst[row] = out;
  }
}

template <int P>
__global__ void narrow_kernel(const PaddedRow<P>* __restrict__ src, std::int64_t rows, int channels,
                              std::uint16_t* __restrict__ dst) {
  for (std::int64_t row = global_thread_index(); row < rows; row += grid_threads()) {
    const PaddedRow<P> in = src[row];
#pragma unroll
    for (int c = 0; c < P; ++c)
      if (c < channels) dst[row * channels + c] = in.v[c];
  }
}

void check_widths(const char* what, std::int64_t channels, std::int64_t padded) {
  if ((padded != 4 && padded != 8) || channels < 1 || channels > padded) {
    throw ValueError(std::string("conv2d channel padding (") + what + "): expected 1 <= channels <= padded and " +
                     "padded 4 or 8, got channels " + std::to_string(channels) + ", padded " + std::to_string(padded));
  }
}

}  // namespace

std::int64_t conv2d_padded_channels(const Conv2dShape& s, DType dtype, int multiple) {
  if (multiple <= 0) return 0;
  const bool half = dtype == DType::BFloat16 || dtype == DType::Float16;
  if (!half || s.format != MemoryFormat::ChannelsLast || s.groups != 1) return 0;
  if (s.in_channels >= kMaxNarrowChannels || s.in_channels % multiple == 0) return 0;
  if (conv2d_single_tap_applies(s, dtype)) return 0;
  return (s.in_channels + multiple - 1) / multiple * multiple;
}

Conv2dShape conv2d_with_in_channels(Conv2dShape s, std::int64_t channels) {
  s.in_channels = channels;
  return s;
}

void conv2d_widen_channels(const Context& ctx, std::int64_t rows, std::int64_t channels, std::int64_t padded,
                           const void* src, void* dst) {
  check_widths("widen", channels, padded);
  if (rows <= 0) return;
  memory::CudaDeviceGuard device(ctx.device);
  const auto* in = static_cast<const std::uint16_t*>(src);
  const int c = static_cast<int>(channels);
  if (padded == 4) {
    widen_kernel<4><<<grid_for(rows), kBlockThreads, 0, stream_of(ctx.stream)>>>(in, rows, c,
                                                                                 static_cast<PaddedRow<4>*>(dst));
  } else {
    widen_kernel<8><<<grid_for(rows), kBlockThreads, 0, stream_of(ctx.stream)>>>(in, rows, c,
                                                                                 static_cast<PaddedRow<8>*>(dst));
  }
  SUBLET_CUDA_LAUNCH_CHECK(widen_kernel);
}

void conv2d_narrow_channels(const Context& ctx, std::int64_t rows, std::int64_t padded, std::int64_t channels,
                            const void* src, void* dst) {
  check_widths("narrow", channels, padded);
  if (rows <= 0) return;
  memory::CudaDeviceGuard device(ctx.device);
  auto* out = static_cast<std::uint16_t*>(dst);
  const int c = static_cast<int>(channels);
  if (padded == 4) {
    narrow_kernel<4><<<grid_for(rows), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        static_cast<const PaddedRow<4>*>(src), rows, c, out);
  } else {
    narrow_kernel<8><<<grid_for(rows), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        static_cast<const PaddedRow<8>*>(src), rows, c, out);
  }
  SUBLET_CUDA_LAUNCH_CHECK(narrow_kernel);
}

memory::ScopedBlock conv2d_widened_copy(const Context& ctx, std::int64_t rows, std::int64_t channels,
                                        std::int64_t padded, const void* src) {
  memory::ScopedBlock block = ctx.workspace(static_cast<std::size_t>(rows * padded) * sizeof(std::uint16_t));
  conv2d_widen_channels(ctx, rows, channels, padded, src, block.get());
  return block;
}

}  // namespace sublet::ops::cuda
