// max_pool2d, avg_pool2d, adaptive_avg_pool2d: forward against naive loop references, every
// backward against float64 central finite differences, shape errors.
#include "ops/pooling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/errors.h"
#include "nn_test_support.h"

namespace sublet::ops {
namespace {

using testing::cpu_context;
using testing::kGradientTolerance;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_values;

Pool2dShape make_shape(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t kh,
                       std::int64_t kw, std::int64_t sh, std::int64_t sw, std::int64_t ph = 0, std::int64_t pw = 0) {
  Pool2dShape s;
  s.batch = n; s.channels = c; s.in_height = h; s.in_width = w;
  s.kernel_h = kh; s.kernel_w = kw; s.stride_h = sh; s.stride_w = sw; s.pad_h = ph; s.pad_w = pw;
  return s;
}

std::string describe(const Pool2dShape& s) {
  return "in " + std::to_string(s.in_height) + "x" + std::to_string(s.in_width) + " k " +
         std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) + " s " + std::to_string(s.stride_h) +
         "x" + std::to_string(s.stride_w) + " p " + std::to_string(s.pad_h) + "x" + std::to_string(s.pad_w) +
         " d " + std::to_string(s.dilation_h) + "x" + std::to_string(s.dilation_w);
}

// Non-overlapping, overlapping with padding, non-square kernel/stride/input, a stride that
// leaves a remainder, and (max pooling only) dilation.
std::vector<Pool2dShape> configurations(bool with_dilation) {
  std::vector<Pool2dShape> shapes = {make_shape(2, 3, 6, 8, 2, 2, 2, 2), make_shape(2, 2, 7, 7, 3, 3, 2, 2, 1, 1),
                                     make_shape(1, 3, 9, 6, 3, 2, 2, 1, 1, 0), make_shape(3, 1, 8, 7, 2, 3, 3, 2)};
  if (with_dilation) {
    Pool2dShape s = make_shape(2, 2, 9, 8, 3, 2, 1, 2, 1, 1);
    s.dilation_h = 2; s.dilation_w = 3;
    shapes.push_back(s);
  }
  return shapes;
}

struct MaxReference {
  std::vector<double> values;
  std::vector<std::int64_t> indices;
};

MaxReference naive_max_pool(const Pool2dShape& s, const std::vector<double>& x) {
  MaxReference r;
  for (std::int64_t p = 0; p < s.batch * s.channels; ++p)
    for (std::int64_t oh = 0; oh < s.out_height(); ++oh)
      for (std::int64_t ow = 0; ow < s.out_width(); ++ow) {
        double best = -std::numeric_limits<double>::infinity();
        std::int64_t best_index = -1;
        for (std::int64_t kh = 0; kh < s.kernel_h; ++kh)
          for (std::int64_t kw = 0; kw < s.kernel_w; ++kw) {
            const std::int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
            const std::int64_t iw = ow * s.stride_w - s.pad_w + kw * s.dilation_w;
            if (ih < 0 || ih >= s.in_height || iw < 0 || iw >= s.in_width) continue;
            const double v = x[(p * s.in_height + ih) * s.in_width + iw];
            if (v > best) { best = v; best_index = ih * s.in_width + iw; }
          }
        r.values.push_back(best);
        r.indices.push_back(best_index);
      }
  return r;
}

std::vector<double> naive_avg_pool(const Pool2dShape& s, const std::vector<double>& x, bool count_include_pad) {
  std::vector<double> out;
  for (std::int64_t p = 0; p < s.batch * s.channels; ++p)
    for (std::int64_t oh = 0; oh < s.out_height(); ++oh)
      for (std::int64_t ow = 0; ow < s.out_width(); ++ow) {
        double sum = 0;
        std::int64_t inside = 0, padded = 0;
        for (std::int64_t kh = 0; kh < s.kernel_h; ++kh)
          for (std::int64_t kw = 0; kw < s.kernel_w; ++kw) {
            const std::int64_t ih = oh * s.stride_h - s.pad_h + kh, iw = ow * s.stride_w - s.pad_w + kw;
            // The padded input spans [-pad, size + pad); window cells beyond it do not count.
            if (ih < s.in_height + s.pad_h && iw < s.in_width + s.pad_w) ++padded;
            if (ih < 0 || ih >= s.in_height || iw < 0 || iw >= s.in_width) continue;
            sum += x[(p * s.in_height + ih) * s.in_width + iw];
            ++inside;
          }
        out.push_back(sum / static_cast<double>(count_include_pad ? padded : inside));
      }
  return out;
}

std::vector<double> max_forward(const Pool2dShape& s, const std::vector<double>& x) {
  std::vector<double> out(static_cast<std::size_t>(s.output_numel()));
  std::vector<std::int64_t> indices(out.size());
  max_pool2d_forward(cpu_context(), s, DType::Float64, x.data(), out.data(), indices.data());
  return out;
}

std::vector<double> avg_forward(const Pool2dShape& s, const std::vector<double>& x, bool count_include_pad) {
  std::vector<double> out(static_cast<std::size_t>(s.output_numel()));
  avg_pool2d_forward(cpu_context(), s, DType::Float64, x.data(), out.data(), count_include_pad);
  return out;
}

TEST(MaxPool2d, ForwardMatchesReferenceValuesAndIndices) {
  std::uint64_t seed = 1;
  for (const Pool2dShape& s : configurations(true)) {
    SCOPED_TRACE(describe(s));
    const auto x = random_values(s.input_numel(), seed++);
    const MaxReference ref = naive_max_pool(s, x);
    std::vector<double> out(ref.values.size());
    std::vector<std::int64_t> indices(ref.values.size());
    max_pool2d_forward(cpu_context(), s, DType::Float64, x.data(), out.data(), indices.data());
    EXPECT_EQ(out, ref.values);
    EXPECT_EQ(indices, ref.indices);
    const auto x32 = testing::cast_values<float>(x);
    std::vector<float> out32(ref.values.size());
    max_pool2d_forward(cpu_context(), s, DType::Float32, x32.data(), out32.data(), indices.data());
    EXPECT_EQ(indices, ref.indices);
    EXPECT_LE(max_relative_error(out32, ref.values), 1e-7);  // a copy of a float32 value
  }
}

TEST(MaxPool2d, NanIsTheMaximum) {
  const Pool2dShape s = make_shape(1, 1, 2, 2, 2, 2, 2, 2);
  std::vector<double> x = {0.5, std::nan(""), 2.0, -1.0}, out(1);
  std::vector<std::int64_t> index(1);
  max_pool2d_forward(cpu_context(), s, DType::Float64, x.data(), out.data(), index.data());
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(index[0], 1);
}

TEST(MaxPool2d, BackwardMatchesFiniteDifferences) {
  std::uint64_t seed = 100;
  for (const Pool2dShape& s : configurations(true)) {
    SCOPED_TRACE(describe(s));
    const auto x = random_values(s.input_numel(), seed++);
    const auto grad_output = random_values(s.output_numel(), seed++);
    std::vector<double> out(grad_output.size()), grad_input(x.size());
    std::vector<std::int64_t> indices(grad_output.size());
    max_pool2d_forward(cpu_context(), s, DType::Float64, x.data(), out.data(), indices.data());
    max_pool2d_backward(cpu_context(), s, DType::Float64, grad_output.data(), indices.data(), grad_input.data());
    EXPECT_LE(max_relative_error(grad_input, numeric_gradient([&](const std::vector<double>& v) {
                return max_forward(s, v); }, x, grad_output)), kGradientTolerance);
  }
}

TEST(AvgPool2d, ForwardMatchesReferenceWithAndWithoutPadCounting) {
  std::uint64_t seed = 200;
  for (const Pool2dShape& s : configurations(false)) {
    SCOPED_TRACE(describe(s));
    const auto x = random_values(s.input_numel(), seed++);
    for (bool count_include_pad : {true, false}) {
      EXPECT_LE(max_relative_error(avg_forward(s, x, count_include_pad), naive_avg_pool(s, x, count_include_pad)), 1e-14);
      const auto x32 = testing::cast_values<float>(x);
      std::vector<float> out32(static_cast<std::size_t>(s.output_numel()));
      avg_pool2d_forward(cpu_context(), s, DType::Float32, x32.data(), out32.data(), count_include_pad);
      EXPECT_LE(max_relative_error(out32, naive_avg_pool(s, x, count_include_pad)), 1e-6);
    }
  }
}

TEST(AvgPool2d, PaddingChangesTheDivisorOnlyWhenCounted) {
  // 3x3 window, padding 1, on a 2x2 input: corner windows hold 4 real values (of 9).
  const Pool2dShape s = make_shape(1, 1, 2, 2, 3, 3, 1, 1, 1, 1);
  const std::vector<double> x = {1.0, 2.0, 3.0, 6.0};
  EXPECT_DOUBLE_EQ(avg_forward(s, x, true)[0], 12.0 / 9.0);
  EXPECT_DOUBLE_EQ(avg_forward(s, x, false)[0], 12.0 / 4.0);
}

TEST(AvgPool2d, BackwardMatchesFiniteDifferences) {
  std::uint64_t seed = 300;
  for (const Pool2dShape& s : configurations(false)) {
    SCOPED_TRACE(describe(s));
    const auto x = random_values(s.input_numel(), seed++);
    const auto grad_output = random_values(s.output_numel(), seed++);
    for (bool count_include_pad : {true, false}) {
      std::vector<double> grad_input(x.size());
      avg_pool2d_backward(cpu_context(), s, DType::Float64, grad_output.data(), grad_input.data(), count_include_pad);
      EXPECT_LE(max_relative_error(grad_input, numeric_gradient([&](const std::vector<double>& v) {
                  return avg_forward(s, v, count_include_pad); }, x, grad_output)), kGradientTolerance);
    }
  }
}

std::vector<double> naive_adaptive(const AdaptivePool2dShape& s, const std::vector<double>& x) {
  std::vector<double> out;
  for (std::int64_t p = 0; p < s.batch * s.channels; ++p)
    for (std::int64_t i = 0; i < s.out_height; ++i)
      for (std::int64_t j = 0; j < s.out_width; ++j) {
        // PyTorch: start = floor(i * in / out), end = ceil((i + 1) * in / out), in floating point.
        const auto h0 = static_cast<std::int64_t>(std::floor(double(i * s.in_height) / double(s.out_height)));
        const auto h1 = static_cast<std::int64_t>(std::ceil(double((i + 1) * s.in_height) / double(s.out_height)));
        const auto w0 = static_cast<std::int64_t>(std::floor(double(j * s.in_width) / double(s.out_width)));
        const auto w1 = static_cast<std::int64_t>(std::ceil(double((j + 1) * s.in_width) / double(s.out_width)));
        double sum = 0;
        for (std::int64_t h = h0; h < h1; ++h)
          for (std::int64_t w = w0; w < w1; ++w) sum += x[(p * s.in_height + h) * s.in_width + w];
        out.push_back(sum / double((h1 - h0) * (w1 - w0)));
      }
  return out;
}

// Global pooling, overlapping bins (7 -> 3), a non-square output, upsampling (3 -> 5), identity.
std::vector<AdaptivePool2dShape> adaptive_configurations() {
  return {{2, 3, 5, 6, 1, 1}, {2, 2, 7, 7, 3, 3}, {1, 3, 8, 5, 2, 4}, {2, 1, 3, 4, 5, 6}, {1, 2, 4, 3, 4, 3}};
}

TEST(AdaptiveAvgPool2d, ForwardMatchesPyTorchBinFormula) {
  std::uint64_t seed = 400;
  for (const AdaptivePool2dShape& s : adaptive_configurations()) {
    SCOPED_TRACE(std::to_string(s.in_height) + "x" + std::to_string(s.in_width) + " -> " +
                 std::to_string(s.out_height) + "x" + std::to_string(s.out_width));
    const auto x = random_values(s.input_numel(), seed++);
    std::vector<double> out(static_cast<std::size_t>(s.output_numel()));
    adaptive_avg_pool2d_forward(cpu_context(), s, DType::Float64, x.data(), out.data());
    EXPECT_LE(max_relative_error(out, naive_adaptive(s, x)), 1e-14);
  }
}

TEST(AdaptiveAvgPool2d, BackwardMatchesFiniteDifferences) {
  std::uint64_t seed = 500;
  for (const AdaptivePool2dShape& s : adaptive_configurations()) {
    SCOPED_TRACE(std::to_string(s.in_height) + "x" + std::to_string(s.in_width) + " -> " +
                 std::to_string(s.out_height) + "x" + std::to_string(s.out_width));
    const auto x = random_values(s.input_numel(), seed++);
    const auto grad_output = random_values(s.output_numel(), seed++);
    std::vector<double> grad_input(x.size());
    adaptive_avg_pool2d_backward(cpu_context(), s, DType::Float64, grad_output.data(), grad_input.data());
    const auto numeric = numeric_gradient([&](const std::vector<double>& v) {
      std::vector<double> out(grad_output.size());
      adaptive_avg_pool2d_forward(cpu_context(), s, DType::Float64, v.data(), out.data());
      return out;
    }, x, grad_output);
    EXPECT_LE(max_relative_error(grad_input, numeric), kGradientTolerance);
  }
}

TEST(PoolingShapeCheck, BadShapesNameTheOpAndTheSizes) {
  try {
    make_shape(1, 1, 8, 8, 3, 3, 1, 1, 2, 0).validate("max_pool2d");
    FAIL() << "padding larger than half the kernel was accepted";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("max_pool2d"), std::string::npos) << message;
    EXPECT_NE(message.find("padding 2x0"), std::string::npos) << message;
    EXPECT_NE(message.find("kernel 3x3"), std::string::npos) << message;
  }
  try {
    make_shape(1, 1, 2, 5, 3, 3, 1, 1).validate("avg_pool2d");
    FAIL() << "a kernel taller than the input was accepted";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("avg_pool2d"), std::string::npos) << message;
    EXPECT_NE(message.find("[1, 1, 2, 5]"), std::string::npos) << message;
  }
  Pool2dShape dilated = make_shape(1, 1, 8, 8, 2, 2, 2, 2);
  dilated.dilation_h = 2;
  std::vector<double> x(64, 1.0), out(16);
  EXPECT_THROW(avg_pool2d_forward(cpu_context(), dilated, DType::Float64, x.data(), out.data()), ShapeError);
  try {
    AdaptivePool2dShape{1, 1, 4, 4, 0, 2}.validate();
    FAIL() << "an empty adaptive output was accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("adaptive_avg_pool2d"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("0x2"), std::string::npos) << e.what();
  }
}

TEST(PoolingDispatch, RejectsIntegerDtype) {
  const Pool2dShape s = make_shape(1, 1, 2, 2, 2, 2, 2, 2);
  std::vector<std::int64_t> x(4, 1), out(1), indices(1);
  EXPECT_THROW(max_pool2d_forward(cpu_context(), s, DType::Int64, x.data(), out.data(), indices.data()), DTypeError);
}

}  // namespace
}  // namespace sublet::ops
