#include "ops/cpu/conv_bn_fusion_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/errors.h"

namespace sublet::ops::cpu {

namespace {

// The channel of the element at memory offset i of an (N, C, H, W) activation.
struct ChannelOf {
  std::int64_t channels, spatial;
  bool channels_last;
  std::int64_t operator()(std::int64_t i) const { return channels_last ? i % channels : (i / spatial) % channels; }
};

void require_floating(const char* op, DType dtype) {
  if (dtype != DType::Float32 && dtype != DType::Float64) {
    throw DTypeError(std::string(op) + " (cpu): expected float32 or float64 activations, got " + dtype_name(dtype));
  }
}

template <typename T>
void sbr(const BatchNormShape& s, const T* x, const float* scale, const float* bias, T* out) {
  const ChannelOf channel{s.channels, s.spatial(), s.format == MemoryFormat::ChannelsLast};
  const std::int64_t n = s.numel();
#pragma omp parallel for if (n > 65536)
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t c = channel(i);
    out[i] = std::max(x[i] * static_cast<T>(scale[c]) + static_cast<T>(bias[c]), T(0));
  }
}

}  // namespace

void scale_bias_relu(const Context&, const BatchNormShape& shape, DType dtype, const void* input, const float* scale,
                     const float* bias, void* output) {
  require_floating("scale_bias_relu", dtype);
  if (dtype == DType::Float64) {
    sbr(shape, static_cast<const double*>(input), scale, bias, static_cast<double*>(output));
  } else {
    sbr(shape, static_cast<const float*>(input), scale, bias, static_cast<float*>(output));
  }
}

namespace {

template <typename T>
void conv_scale_bias_relu_genstats(const Context& ctx, const Conv2dShape& s, DType dtype, const T* input,
                                   const float* scale, const float* bias, const void* weight, T* output, float* sum,
                                   float* sqsum) {
  std::vector<T> activated;
  const T* conv_input = input;
  if (scale != nullptr) {
    activated.resize(static_cast<std::size_t>(s.input_numel()));
    BatchNormShape in{s.batch, s.in_channels, s.in_height, s.in_width, s.format};
    sbr(in, input, scale, bias, activated.data());
    conv_input = activated.data();
  }
  conv2d_forward(ctx, s, dtype, conv_input, weight, nullptr, output);
  if (sum == nullptr) return;
  // Per-channel sums in double, then float32 (the fused plan sums in float32).
  const std::int64_t channels = s.out_channels, spatial = s.out_height() * s.out_width();
  const ChannelOf channel{channels, spatial, s.format == MemoryFormat::ChannelsLast};
  std::vector<double> sums(static_cast<std::size_t>(channels), 0.0), squares(static_cast<std::size_t>(channels), 0.0);
  for (std::int64_t i = 0; i < s.output_numel(); ++i) {
    const auto c = static_cast<std::size_t>(channel(i));
    const double y = static_cast<double>(output[i]);
    sums[c] += y;
    squares[c] += y * y;
  }
  for (std::int64_t c = 0; c < channels; ++c) {
    sum[c] = static_cast<float>(sums[static_cast<std::size_t>(c)]);
    sqsum[c] = static_cast<float>(squares[static_cast<std::size_t>(c)]);
  }
}

}  // namespace

bool conv2d_scale_bias_relu_genstats(const Context& ctx, const Conv2dShape& s, DType dtype, const void* input,
                                     const float* scale, const float* bias, const void* weight, void* output,
                                     float* sum, float* sqsum, bool) {
  require_floating("conv2d_scale_bias_relu_genstats", dtype);
  if (dtype == DType::Float64) {
    conv_scale_bias_relu_genstats(ctx, s, dtype, static_cast<const double*>(input), scale, bias, weight,
                                  static_cast<double*>(output), sum, sqsum);
  } else {
    conv_scale_bias_relu_genstats(ctx, s, dtype, static_cast<const float*>(input), scale, bias, weight,
                                  static_cast<float*>(output), sum, sqsum);
  }
  return false;
}

void batch_norm_stats_from_sums(const Context&, std::int64_t channels, std::int64_t count, const float* sum,
                                const float* sqsum, const float* weight, const float* bias, float* running_mean,
                                float* running_var, double momentum, double eps, float* save_mean, float* save_invstd,
                                float* scale, float* shift, std::int64_t* num_batches_tracked) {
  const double n = static_cast<double>(count);
  for (std::int64_t c = 0; c < channels; ++c) {
    const double mean = sum[c] / n;
    const double var = std::max(sqsum[c] / n - mean * mean, 0.0);
    const double invstd = 1.0 / std::sqrt(var + eps);
    const double w = weight != nullptr ? weight[c] : 1.0, b = bias != nullptr ? bias[c] : 0.0;
    save_mean[c] = static_cast<float>(mean);
    save_invstd[c] = static_cast<float>(invstd);
    scale[c] = static_cast<float>(w * invstd);
    shift[c] = static_cast<float>(b - mean * w * invstd);
    if (running_mean != nullptr) {
      running_mean[c] = static_cast<float>((1.0 - momentum) * running_mean[c] + momentum * mean);
      running_var[c] = static_cast<float>((1.0 - momentum) * running_var[c] + momentum * var * n / (n - 1.0));
    }
  }
  if (num_batches_tracked != nullptr) ++*num_batches_tracked;
}

}  // namespace sublet::ops::cpu
