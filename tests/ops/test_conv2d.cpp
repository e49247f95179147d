// conv2d: forward against a naive loop reference, every backward against float64 central
// finite differences, shape errors, dtype/device errors, and workspace accounting.
#include "ops/conv2d.h"

#include <gtest/gtest.h>

#include <string>

#include "core/errors.h"
#include "core/tuning.h"
#include "memory/registry.h"
#include "nn_test_support.h"
#include "ops/cpu/conv2d_avx2_cpu.h"
#include "ops/cpu/conv2d_avx512_tiles.h"

namespace sublet::ops {
namespace {

using testing::cpu_context;
using testing::kGradientTolerance;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_values;

// Direct definition of the convolution (cross-correlation), accumulated in double.
std::vector<double> naive_conv2d(const Conv2dShape& s, const std::vector<double>& input,
                                 const std::vector<double>& weight, const std::vector<double>* bias) {
  const std::int64_t oh_count = s.out_height(), ow_count = s.out_width();
  const std::int64_t cg = s.in_channels / s.groups, ocg = s.out_channels / s.groups;
  std::vector<double> out(static_cast<std::size_t>(s.output_numel()));
  for (std::int64_t n = 0; n < s.batch; ++n)
    for (std::int64_t oc = 0; oc < s.out_channels; ++oc)
      for (std::int64_t oh = 0; oh < oh_count; ++oh)
        for (std::int64_t ow = 0; ow < ow_count; ++ow) {
          double sum = bias ? (*bias)[oc] : 0.0;
          const std::int64_t group = oc / ocg;
          for (std::int64_t c = 0; c < cg; ++c)
            for (std::int64_t kh = 0; kh < s.kernel_h; ++kh)
              for (std::int64_t kw = 0; kw < s.kernel_w; ++kw) {
                const std::int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
                const std::int64_t iw = ow * s.stride_w - s.pad_w + kw * s.dilation_w;
                if (ih < 0 || ih >= s.in_height || iw < 0 || iw >= s.in_width) continue;
                const std::int64_t ic = group * cg + c;
                sum += input[((n * s.in_channels + ic) * s.in_height + ih) * s.in_width + iw] *
                       weight[((oc * cg + c) * s.kernel_h + kh) * s.kernel_w + kw];
              }
          out[((n * s.out_channels + oc) * oh_count + oh) * ow_count + ow] = sum;
        }
  return out;
}

Conv2dShape make_shape(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                       std::int64_t oc, std::int64_t kh, std::int64_t kw) {
  Conv2dShape s;
  s.batch = n; s.in_channels = c; s.in_height = h; s.in_width = w;
  s.out_channels = oc; s.kernel_h = kh; s.kernel_w = kw;
  return s;
}

struct NamedShape {
  std::string name;
  Conv2dShape shape;
};

// Covers: padding, stride, non-square input and kernel, dilation, groups, depthwise, the
// pointwise fast path (with and without groups), 1x1 with stride (not the fast path),
// a stride that does not divide the input, a batch larger than the thread count (several
// images per GEMM), a batch of one (one GEMM, threaded by Eigen).
std::vector<NamedShape> configurations() {
  std::vector<NamedShape> shapes;
  { Conv2dShape s = make_shape(3, 3, 7, 6, 4, 3, 3); s.pad_h = s.pad_w = 1; shapes.push_back({"pad1", s}); }
  { Conv2dShape s = make_shape(2, 2, 9, 7, 3, 3, 2); s.stride_h = 2; s.stride_w = 3; s.pad_h = 1; s.pad_w = 0; shapes.push_back({"stride_nonsquare", s}); }
  { Conv2dShape s = make_shape(2, 2, 8, 9, 3, 3, 3); s.dilation_h = 2; s.dilation_w = 3; s.pad_h = 2; s.pad_w = 1; shapes.push_back({"dilation", s}); }
  { Conv2dShape s = make_shape(2, 4, 6, 5, 6, 3, 3); s.groups = 2; s.pad_h = 1; s.pad_w = 1; shapes.push_back({"groups2", s}); }
  { Conv2dShape s = make_shape(2, 3, 6, 6, 6, 3, 3); s.groups = 3; s.stride_h = s.stride_w = 2; s.pad_h = s.pad_w = 1; shapes.push_back({"depthwise", s}); }
  { Conv2dShape s = make_shape(3, 4, 5, 4, 5, 1, 1); shapes.push_back({"pointwise", s}); }
  { Conv2dShape s = make_shape(2, 4, 5, 4, 6, 1, 1); s.groups = 2; shapes.push_back({"pointwise_groups", s}); }
  { Conv2dShape s = make_shape(2, 3, 7, 5, 2, 1, 1); s.stride_h = s.stride_w = 2; shapes.push_back({"pointwise_stride2", s}); }
  { Conv2dShape s = make_shape(5, 2, 8, 7, 3, 2, 3); s.stride_h = 3; s.stride_w = 2; shapes.push_back({"stride3_remainder", s}); }
  { Conv2dShape s = make_shape(1, 3, 6, 7, 4, 3, 3); s.pad_h = s.pad_w = 1; shapes.push_back({"batch1", s}); }
  // Stride 1 with the output as wide as the input takes im2col's shifted-copy path: with
  // dilation and an output shorter than the input, and with shifts as large as the width.
  { Conv2dShape s = make_shape(2, 2, 7, 6, 3, 3, 3); s.dilation_h = s.dilation_w = 2; s.pad_w = 2; shapes.push_back({"same_width_dilated", s}); }
  { Conv2dShape s = make_shape(2, 2, 5, 2, 3, 3, 5); s.pad_h = 1; s.pad_w = 2; shapes.push_back({"narrow_wide_kernel", s}); }
  return shapes;
}

template <typename T>
std::vector<double> run_forward(const Conv2dShape& s, const std::vector<double>& input,
                                const std::vector<double>& weight, const std::vector<double>* bias) {
  const std::vector<T> in = testing::cast_values<T>(input), w = testing::cast_values<T>(weight);
  std::vector<T> b = bias ? testing::cast_values<T>(*bias) : std::vector<T>();
  std::vector<T> out(static_cast<std::size_t>(s.output_numel()));
  conv2d_forward(cpu_context(), s, DTypeOf<T>::value, in.data(), w.data(), bias ? b.data() : nullptr, out.data());
  return testing::cast_values<double>(out);
}

TEST(Conv2dForward, MatchesNaiveReferenceInFloat64AndFloat32) {
  std::uint64_t seed = 1;
  for (const auto& [name, s] : configurations()) {
    SCOPED_TRACE(name);
    const auto input = random_values(s.input_numel(), seed++);
    const auto weight = random_values(s.weight_numel(), seed++);
    const auto bias = random_values(s.out_channels, seed++);
    const auto expected = naive_conv2d(s, input, weight, &bias);
    // float64 differs from the reference only by summation order.
    EXPECT_LE(max_relative_error(run_forward<double>(s, input, weight, &bias), expected), 1e-12);
    // float32: products of values in [-1, 1] summed over at most 36 terms.
    EXPECT_LE(max_relative_error(run_forward<float>(s, input, weight, &bias), expected), 1e-5);
    EXPECT_LE(max_relative_error(run_forward<double>(s, input, weight, nullptr),
                                 naive_conv2d(s, input, weight, nullptr)), 1e-12);
  }
}

TEST(Conv2dBackward, InputGradientMatchesFiniteDifferences) {
  std::uint64_t seed = 100;
  for (const auto& [name, s] : configurations()) {
    SCOPED_TRACE(name);
    const auto input = random_values(s.input_numel(), seed++);
    const auto weight = random_values(s.weight_numel(), seed++);
    const auto grad_output = random_values(s.output_numel(), seed++);
    std::vector<double> grad_input(static_cast<std::size_t>(s.input_numel()));
    conv2d_backward_input(cpu_context(), s, DType::Float64, grad_output.data(), weight.data(), grad_input.data());
    const auto numeric = numeric_gradient(
        [&, shape = s](const std::vector<double>& x) { return run_forward<double>(shape, x, weight, nullptr); },
        input, grad_output);
    EXPECT_LE(max_relative_error(grad_input, numeric), kGradientTolerance);
  }
}

TEST(Conv2dBackward, WeightAndBiasGradientsMatchFiniteDifferences) {
  std::uint64_t seed = 200;
  for (const auto& [name, s] : configurations()) {
    SCOPED_TRACE(name);
    const auto input = random_values(s.input_numel(), seed++);
    const auto weight = random_values(s.weight_numel(), seed++);
    const auto bias = random_values(s.out_channels, seed++);
    const auto grad_output = random_values(s.output_numel(), seed++);
    std::vector<double> grad_weight(static_cast<std::size_t>(s.weight_numel()));
    std::vector<double> grad_bias(static_cast<std::size_t>(s.out_channels));
    conv2d_backward_weight(cpu_context(), s, DType::Float64, grad_output.data(), input.data(),
                           grad_weight.data(), grad_bias.data());
    const auto numeric_weight = numeric_gradient(
        [&, shape = s](const std::vector<double>& w) { return run_forward<double>(shape, input, w, &bias); }, weight, grad_output);
    const auto numeric_bias = numeric_gradient(
        [&, shape = s](const std::vector<double>& b) { return run_forward<double>(shape, input, weight, &b); }, bias, grad_output);
    EXPECT_LE(max_relative_error(grad_weight, numeric_weight), kGradientTolerance);
    EXPECT_LE(max_relative_error(grad_bias, numeric_bias), kGradientTolerance);

    // Without a bias gradient the weight gradient is the same.
    std::vector<double> grad_weight_only(grad_weight.size());
    conv2d_backward_weight(cpu_context(), s, DType::Float64, grad_output.data(), input.data(),
                           grad_weight_only.data(), nullptr);
    EXPECT_LE(max_relative_error(grad_weight_only, grad_weight), 1e-14);
  }
}

TEST(Conv2dBackward, Float32AgreesWithFloat64) {
  Conv2dShape s = make_shape(4, 4, 9, 8, 6, 3, 3);
  s.pad_h = s.pad_w = 1; s.groups = 2;
  const auto input = random_values(s.input_numel(), 7), weight = random_values(s.weight_numel(), 8);
  const auto grad_output = random_values(s.output_numel(), 9);
  std::vector<double> gi64(input.size()), gw64(weight.size());
  conv2d_backward_input(cpu_context(), s, DType::Float64, grad_output.data(), weight.data(), gi64.data());
  conv2d_backward_weight(cpu_context(), s, DType::Float64, grad_output.data(), input.data(), gw64.data(), nullptr);
  const auto input32 = testing::cast_values<float>(input), weight32 = testing::cast_values<float>(weight);
  const auto grad_output32 = testing::cast_values<float>(grad_output);
  std::vector<float> gi32(input.size()), gw32(weight.size());
  conv2d_backward_input(cpu_context(), s, DType::Float32, grad_output32.data(), weight32.data(), gi32.data());
  conv2d_backward_weight(cpu_context(), s, DType::Float32, grad_output32.data(), input32.data(), gw32.data(), nullptr);
  EXPECT_LE(max_relative_error(gi32, gi64), 1e-5);
  EXPECT_LE(max_relative_error(gw32, gw64), 1e-5);
}

// Shapes that take the float32 AVX2 tile kernel (stride 1, output as wide as the input, at
// least 96 output pixels; the weight gradient from 384): a partial last tile of pixels, output
// channels not a multiple of 4, taps not a multiple of 3, groups with dilation (wrapped
// columns two wide), a 5x5 kernel, no vertical padding, and a batch of one (work split by
// channel tiles).
std::vector<NamedShape> tile_kernel_configurations() {
  std::vector<NamedShape> shapes;
  { Conv2dShape s = make_shape(3, 5, 12, 11, 6, 3, 3); s.pad_h = s.pad_w = 1; shapes.push_back({"tiles_pad1", s}); }
  { Conv2dShape s = make_shape(3, 3, 20, 21, 5, 3, 3); s.pad_h = s.pad_w = 1; shapes.push_back({"tiles_weight_gradient", s}); }
  { Conv2dShape s = make_shape(2, 4, 23, 19, 6, 3, 3); s.groups = 2; s.dilation_h = s.dilation_w = 2; s.pad_h = 1; s.pad_w = 2; shapes.push_back({"tiles_groups_dilated", s}); }
  { Conv2dShape s = make_shape(2, 2, 16, 24, 4, 5, 5); s.pad_h = s.pad_w = 2; shapes.push_back({"tiles_5x5", s}); }
  { Conv2dShape s = make_shape(2, 3, 18, 22, 4, 3, 3); s.pad_w = 1; shapes.push_back({"tiles_no_vertical_pad", s}); }
  { Conv2dShape s = make_shape(1, 3, 20, 20, 9, 3, 3); s.pad_h = s.pad_w = 1; shapes.push_back({"tiles_batch1", s}); }
  // The AVX-512 tile covers 48 pixels; the last tile of a plane takes 1, 2 or 3 vectors of 16
  // (124 = 2 * 48 + 28 pixels: two vectors, the second partly used).
  { Conv2dShape s = make_shape(2, 3, 31, 4, 5, 3, 3); s.pad_h = s.pad_w = 1; shapes.push_back({"tiles_avx512_two_vectors", s}); }
  // The AVX-512 weight-gradient tile (8 or more input channels per group): 8 gradient rows,
  // so 11 and 13 output channels leave a short last tile; 420 and 400 pixels a partial last
  // vector; a 5x5 kernel 200 taps (a short last group of 3); a batch of 5 gives an item every
  // tile of an image, a batch of one (below 2 per thread) splits the work by
  // tiles of 4 channels (an item must not sum the next item's rows); groups of 8 channels.
  { Conv2dShape s = make_shape(5, 9, 20, 21, 11, 3, 3); s.pad_h = s.pad_w = 1; shapes.push_back({"tiles_weight_gradient_avx512", s}); }
  { Conv2dShape s = make_shape(1, 8, 20, 20, 13, 5, 5); s.pad_h = s.pad_w = 2; shapes.push_back({"tiles_weight_gradient_avx512_batch1_5x5", s}); }
  { Conv2dShape s = make_shape(2, 16, 20, 20, 10, 3, 3); s.groups = 2; s.pad_h = s.pad_w = 1; shapes.push_back({"tiles_weight_gradient_avx512_groups", s}); }
  return shapes;
}

// Makes cpu_has_avx512() false for a scope (the AVX2 kernels then run on an AVX-512 CPU too).
// (TuningOptions::cpu_avx512, as SUBLET_CPU_NO_AVX512=1 sets it.)
class Avx512Allowed {
 public:
  explicit Avx512Allowed(bool allowed) : scope_([allowed](TuningOptions& o) { o.cpu_avx512 = allowed; }) {}

 private:
  ScopedTuning scope_;
};

// float32 forward against the naive loop and both gradients against float64, on random data.
void expect_float32_matches(const Conv2dShape& s, std::uint64_t seed) {
  const auto input = random_values(s.input_numel(), seed++);
  const auto weight = random_values(s.weight_numel(), seed++);
  const auto bias = random_values(s.out_channels, seed++);
  const auto grad_output = random_values(s.output_numel(), seed++);
  // Forward against the naive loop, with and without bias.
  EXPECT_LE(max_relative_error(run_forward<float>(s, input, weight, &bias), naive_conv2d(s, input, weight, &bias)),
            1e-5);
  EXPECT_LE(max_relative_error(run_forward<float>(s, input, weight, nullptr), naive_conv2d(s, input, weight, nullptr)),
            1e-5);
  // Both gradients against float64 (checked against finite differences above), and the
  // weight gradient with and without the bias gradient.
  std::vector<double> gi64(input.size()), gw64(weight.size()), gb64(bias.size());
  conv2d_backward_input(cpu_context(), s, DType::Float64, grad_output.data(), weight.data(), gi64.data());
  conv2d_backward_weight(cpu_context(), s, DType::Float64, grad_output.data(), input.data(), gw64.data(), gb64.data());
  const auto input32 = testing::cast_values<float>(input), weight32 = testing::cast_values<float>(weight);
  const auto grad_output32 = testing::cast_values<float>(grad_output);
  std::vector<float> gi32(input.size()), gw32(weight.size()), gb32(bias.size()), gw32_only(weight.size());
  conv2d_backward_input(cpu_context(), s, DType::Float32, grad_output32.data(), weight32.data(), gi32.data());
  conv2d_backward_weight(cpu_context(), s, DType::Float32, grad_output32.data(), input32.data(), gw32.data(),
                         gb32.data());
  conv2d_backward_weight(cpu_context(), s, DType::Float32, grad_output32.data(), input32.data(), gw32_only.data(),
                         nullptr);
  EXPECT_LE(max_relative_error(testing::cast_values<double>(gi32), gi64), 1e-5);
  EXPECT_LE(max_relative_error(testing::cast_values<double>(gw32), gw64), 1e-5);
  EXPECT_LE(max_relative_error(testing::cast_values<double>(gb32), gb64), 1e-5);
  EXPECT_EQ(gw32_only, gw32);
}

// Every float32 path twice: with the AVX-512 kernels (tile and GEMM) where the CPU has them,
// and with the AVX2 ones.
TEST(Conv2dTileKernel, Float32MatchesReferenceAndFloat64) {
  for (const bool avx512 : {true, false}) {
    SCOPED_TRACE(avx512 ? "AVX-512 where the CPU has it" : "AVX2");
    const Avx512Allowed isa(avx512);
    std::uint64_t seed = 300;
    for (const auto& [name, s] : tile_kernel_configurations()) {
      SCOPED_TRACE(name);
      expect_float32_matches(s, seed);
      seed += 4;
    }
  }
}

TEST(Conv2dGemmKernel, Float32MatchesReferenceAndFloat64) {
  for (const bool avx512 : {true, false}) {
    SCOPED_TRACE(avx512 ? "AVX-512 where the CPU has it" : "AVX2");
    const Avx512Allowed isa(avx512);
    std::uint64_t seed = 400;
    for (const auto& [name, s] : configurations()) {
      SCOPED_TRACE(name);
      expect_float32_matches(s, seed);
      seed += 4;
    }
  }
}

TEST(Conv2dTileKernel, WeightGradientDoesNotDependOnTheRun) {
  // The per-thread sums are added in a fixed order: two runs give the same bits (resuming a
  // training run relies on it).
  const Conv2dShape s = tile_kernel_configurations()[1].shape;
  const auto input = random_values<float>(s.input_numel(), 11), grad_output = random_values<float>(s.output_numel(), 12);
  std::vector<float> first(static_cast<std::size_t>(s.weight_numel())), second(first.size());
  conv2d_backward_weight(cpu_context(), s, DType::Float32, grad_output.data(), input.data(), first.data(), nullptr);
  conv2d_backward_weight(cpu_context(), s, DType::Float32, grad_output.data(), input.data(), second.data(), nullptr);
  EXPECT_EQ(first, second);
}

TEST(Conv2dShapeCheck, BadShapesNameTheOpAndTheSizes) {
  Conv2dShape groups = make_shape(1, 6, 8, 8, 4, 3, 3);
  groups.groups = 4;
  try {
    groups.validate();
    FAIL() << "groups not dividing in_channels was accepted";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("conv2d"), std::string::npos) << message;
    EXPECT_NE(message.find("in_channels 6"), std::string::npos) << message;
    EXPECT_NE(message.find("groups 4"), std::string::npos) << message;
  }
  Conv2dShape too_big = make_shape(1, 1, 4, 5, 1, 3, 3);
  too_big.dilation_h = 2;
  try {
    too_big.validate();
    FAIL() << "a dilated kernel larger than the input was accepted";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("conv2d"), std::string::npos) << message;
    EXPECT_NE(message.find("5x3"), std::string::npos) << message;  // dilated extent
    EXPECT_NE(message.find("4x5"), std::string::npos) << message;  // padded input
  }
  Conv2dShape bad_stride = make_shape(1, 1, 4, 4, 1, 3, 3);
  bad_stride.stride_w = 0;
  EXPECT_THROW(bad_stride.validate(), ShapeError);
  // The op entry points validate too, before touching any pointer.
  EXPECT_THROW(conv2d_forward(cpu_context(), groups, DType::Float32, nullptr, nullptr, nullptr, nullptr), ShapeError);
}

TEST(Conv2dDispatch, RejectsIntegerDtype) {
  const Conv2dShape s = make_shape(1, 1, 3, 3, 1, 3, 3);
  std::vector<std::int64_t> data(9, 1), out(1);
  EXPECT_THROW(conv2d_forward(cpu_context(), s, DType::Int64, data.data(), data.data(), nullptr, out.data()), DTypeError);
}

// A device whose backend is not built in has no table entries: the kernel table's DTypeError,
// which names the op and the device (it was a DeviceError before the kernel tables).
TEST(Conv2dDispatch, CudaContextWithoutCudaBuildThrowsTheNoKernelError) {
  if (memory::cuda_built()) GTEST_SKIP() << "CUDA is built in: the CUDA conv2d is tested in test_cuda_conv2d";
  const Conv2dShape s = make_shape(1, 1, 3, 3, 1, 3, 3);
  const Context cuda{Device::cuda(0), nullptr, nullptr};
  std::vector<float> values(9, 1.0f), result(1);
  try {
    conv2d_forward(cuda, s, DType::Float32, values.data(), values.data(), nullptr, result.data());
    FAIL() << "a CUDA context ran on the CPU kernel";
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d: no kernel for float32 contiguous on cuda:0"), std::string::npos)
        << e.what();
  }
}

TEST(Conv2dWorkspace, ColumnBuffersComeFromTheAllocator) {
  Conv2dShape s = make_shape(4, 8, 16, 16, 8, 3, 3);
  s.pad_h = s.pad_w = 1;
  const auto input = random_values<double>(s.input_numel(), 3), weight = random_values<double>(s.weight_numel(), 4);
  std::vector<double> output(static_cast<std::size_t>(s.output_numel()));
  const Device cpu = Device::cpu();
  const std::size_t before = memory_allocated(cpu);
  reset_peak_memory_stats(cpu);
  conv2d_forward(cpu_context(), s, DType::Float64, input.data(), weight.data(), nullptr, output.data());
  // At least one thread's column matrix [C*KH*KW, OH*OW] was leased, and given back.
  const std::size_t one_column_matrix = 8 * 9 * 16 * 16 * sizeof(double);
  EXPECT_GE(max_memory_allocated(cpu), before + one_column_matrix);
  EXPECT_EQ(memory_allocated(cpu), before);
}

TEST(Conv2dWorkspace, TileKernelInputCopiesComeFromTheAllocator) {
  if (!cpu::conv2d_avx2_applies(tile_kernel_configurations()[0].shape)) {
    GTEST_SKIP() << "built without AVX2/FMA: the float32 tile kernel is not compiled in";
  }
  Conv2dShape s = make_shape(4, 8, 16, 16, 8, 3, 3);
  s.pad_h = s.pad_w = 1;
  const auto input = random_values<float>(s.input_numel(), 3), weight = random_values<float>(s.weight_numel(), 4);
  std::vector<float> output(static_cast<std::size_t>(s.output_numel()));
  const Device cpu = Device::cpu();
  const std::size_t before = memory_allocated(cpu);
  reset_peak_memory_stats(cpu);
  conv2d_forward(cpu_context(), s, DType::Float32, input.data(), weight.data(), nullptr, output.data());
  // At least one thread's copies of an image (one per kernel column) were leased, and given back.
  const std::size_t one_image_copies = 3 * 8 * 16 * 16 * sizeof(float);
  EXPECT_GE(max_memory_allocated(cpu), before + one_image_copies);
  EXPECT_EQ(memory_allocated(cpu), before);
}

}  // namespace
}  // namespace sublet::ops
