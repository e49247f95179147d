// linear_gelu_linear on CUDA, where the tanh GELU runs in cuBLASLt's GEMM epilogues
// (ops/cuda/linear_gelu_cuda.cpp): the output and all five gradients against the unfused three
// ops in float64 on the CPU on the very same (16-bit rounded) values, bfloat16 and float16; odd
// row counts and widths; the countable fallbacks (a hidden width cuBLASLt's aux layout cannot
// take, the switch, backward on the unfused way); autocast; float32 staying unfused; and the
// epilogue's GELU and its derivative being the tanh approximation, not the erf form.
// A GPU-only binary: run it on the GPU machine with SUBLET_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/tuning.h"
#include "models/gpt.h"
#include "ops/gelu_math.h"
#include "ops/linear_gelu.h"
#include "runtime/autocast.h"
#include "runtime/nn/functional.h"
#include "tests/runtime/nn/cuda_parity.h"
#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

namespace F = nn::functional;
using testing::normalized_error;
using testing::parity_tolerance;
using testing::random64;

// The epilogues are off by default (slower than the separate kernels in GPT-2 small's step on an
// H100): every test here runs with them on, and the ones about the unfused way switch them off.
class EpilogueOn : public ::testing::Environment {
 public:
  void SetUp() override { scope_.emplace([](TuningOptions& t) { t.gelu_epilogue = true; }); }
  void TearDown() override { scope_.reset(); }

 private:
  std::optional<ScopedTuning> scope_;
};
::testing::Environment* const kEpilogueOn = ::testing::AddGlobalTestEnvironment(new EpilogueOn);

struct MlpShape {
  Shape rows;  // the input's leading dimensions
  std::int64_t in, hidden, out;
};

std::string text(const MlpShape& s, DType dtype) {
  return std::string(dtype_name(dtype)) + " rows " + shape_str(s.rows) + ", " + std::to_string(s.in) + " -> " +
         std::to_string(s.hidden) + " -> " + std::to_string(s.out);
}

// Float64 CPU operands, scaled so that the pre-activations are of order 1 (GELU's curved part).
std::vector<Tensor> random_operands(const MlpShape& s, std::uint64_t seed) {
  Shape input_sizes = s.rows;
  input_sizes.push_back(s.in);
  return {random64(input_sizes, seed), random64({s.hidden, s.in}, seed + 1).mul(1.0 / std::sqrt(double(s.in))),
          random64({s.hidden}, seed + 2).mul(0.5),
          random64({s.out, s.hidden}, seed + 3).mul(1.0 / std::sqrt(double(s.hidden))),
          random64({s.out}, seed + 4).mul(0.5)};
}

Tensor unfused(const std::vector<Tensor>& in) {
  return F::linear(F::gelu(F::linear(in[0], in[1], in[2]), F::GeluApproximate::Tanh), in[3], in[4]);
}

// The five operands on CUDA in `dtype` and the same values in float64 on the CPU, all requiring grad.
struct Operands {
  std::vector<Tensor> gpu, cpu;
};

Operands operands_in(const std::vector<Tensor>& values, DType dtype) {
  Operands o;
  for (const Tensor& t : values) {
    Tensor g = t.to(dtype).to(Device::cuda(0));
    g.requires_grad_(true);
    Tensor c = g.detach().to(Device::cpu()).to(DType::Float64);
    c.requires_grad_(true);
    o.gpu.push_back(g);
    o.cpu.push_back(c);
  }
  return o;
}

// Runs the float64 reference, then backward of sum(out * u) through both; expects the output
// and every gradient within the dtype's tolerance.
void expect_matches_reference(const Tensor& out_gpu, const Operands& o, DType dtype, const std::string& what) {
  const Tensor out_cpu = unfused(o.cpu);
  Generator generator(77);
  const Tensor u = randn(out_cpu.sizes(), generator, DType::Float64);
  out_cpu.mul(u).sum().backward();
  out_gpu.mul(u.to(out_gpu.dtype()).to(Device::cuda(0))).sum().backward();
  const double tolerance = parity_tolerance(dtype);
  EXPECT_EQ(out_gpu.dtype(), dtype) << what;
  EXPECT_EQ(out_gpu.sizes(), out_cpu.sizes()) << what;
  EXPECT_LE(normalized_error(out_gpu, out_cpu), tolerance) << what << " output";
  const char* names[] = {"input", "fc weight", "fc bias", "proj weight", "proj bias"};
  for (std::size_t i = 0; i < o.gpu.size(); ++i) {
    ASSERT_TRUE(o.gpu[i].grad().defined()) << what << " " << names[i];
    EXPECT_EQ(o.gpu[i].grad().sizes(), o.gpu[i].sizes()) << what << " " << names[i];
    EXPECT_LE(normalized_error(o.gpu[i].grad(), o.cpu[i].grad()), tolerance) << what << " " << names[i] << " gradient";
  }
}

Tensor fused_of(const std::vector<Tensor>& in) {
  return F::linear_gelu_linear_fused(in[0], in[1], in[2], in[3], in[4]);
}

TEST(LinearGeluCuda, AlignedShapesRunFusedAndMatchTheReference) {
  SUBLET_SKIP_WITHOUT_GPU("linear_gelu_linear with the GELU in cuBLASLt's epilogues against float64");
  const std::int64_t before = ops::linear_gelu_fallbacks();
  const std::vector<MlpShape> shapes = {{{4, 16}, 64, 256, 64}, {{3, 7}, 24, 40, 24}, {{1}, 8, 8, 8},
                                        {{2, 1, 9}, 32, 96, 16}};
  std::uint64_t seed = 1;
  for (const MlpShape& s : shapes) {
    for (DType dtype : {DType::BFloat16, DType::Float16}) {
      const Operands o = operands_in(random_operands(s, seed += 10), dtype);
      const Tensor out = fused_of(o.gpu);
      ASSERT_TRUE(out.defined()) << text(s, dtype) << ": the fused form declined";
      expect_matches_reference(out, o, dtype, text(s, dtype));
    }
  }
  // Widths that are multiples of 8 on 256-byte-aligned tensors: cuBLASLt takes every one, both ways.
  EXPECT_EQ(ops::linear_gelu_fallbacks(), before);
}

TEST(LinearGeluCuda, OddInputAndOutputWidthsMatchTheReference) {
  SUBLET_SKIP_WITHOUT_GPU("linear_gelu_linear with odd in/out widths against float64");
  // The hidden width fits the aux layout; in and out are odd (cuBLASLt may decline them: then the
  // three ops run, and the result must match all the same).
  const std::vector<MlpShape> shapes = {{{5}, 13, 24, 7}, {{3, 11}, 33, 48, 17}, {{1}, 1, 8, 1}};
  std::uint64_t seed = 100;
  for (const MlpShape& s : shapes) {
    for (DType dtype : {DType::BFloat16, DType::Float16}) {
      const Operands o = operands_in(random_operands(s, seed += 10), dtype);
      expect_matches_reference(F::linear_gelu_linear(o.gpu[0], o.gpu[1], o.gpu[2], o.gpu[3], o.gpu[4]), o, dtype,
                               text(s, dtype));
    }
  }
}

TEST(LinearGeluCuda, HiddenWidthNotAMultipleOf8FallsBackCountably) {
  SUBLET_SKIP_WITHOUT_GPU("linear_gelu_linear's fallback for a hidden width the aux layout cannot take");
  const MlpShape s{{6}, 16, 36, 16};
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    const Operands o = operands_in(random_operands(s, 200), dtype);
    const std::int64_t before = ops::linear_gelu_fallbacks();
    EXPECT_FALSE(fused_of(o.gpu).defined()) << text(s, dtype);
    EXPECT_EQ(ops::linear_gelu_fallbacks(), before + 1) << text(s, dtype);
    expect_matches_reference(F::linear_gelu_linear(o.gpu[0], o.gpu[1], o.gpu[2], o.gpu[3], o.gpu[4]), o, dtype,
                             text(s, dtype) + " (unfused)");
  }
}

TEST(LinearGeluCuda, BackwardOnTheUnfusedWayMatchesTheReference) {
  SUBLET_SKIP_WITHOUT_GPU("linear_gelu_linear's backward with the switch off after a fused forward");
  const MlpShape s{{2, 10}, 32, 128, 32};
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    const Operands o = operands_in(random_operands(s, 300), dtype);
    const Tensor out = fused_of(o.gpu);
    ASSERT_TRUE(out.defined()) << text(s, dtype);
    // Backward reads the switch too: off, it runs c_proj's input-gradient GEMM, the GELU
    // backward kernel and a column sum instead of the DGELU_BGRAD GEMM.
    const ScopedTuning no_epilogue([](TuningOptions& t) { t.gelu_epilogue = false; });
    expect_matches_reference(out, o, dtype, text(s, dtype) + " (unfused backward)");
  }
}

TEST(LinearGeluCuda, SwitchAndFloat32KeepTheThreeOps) {
  SUBLET_SKIP_WITHOUT_GPU("linear_gelu_linear's switch and float32 on CUDA");
  const MlpShape s{{4, 8}, 32, 64, 32};
  {
    const ScopedTuning no_epilogue([](TuningOptions& t) { t.gelu_epilogue = false; });
    const Operands o = operands_in(random_operands(s, 400), DType::BFloat16);
    EXPECT_FALSE(fused_of(o.gpu).defined()) << "SUBLET_GELU_EPILOGUE=0";
  }
  EXPECT_FALSE(ops::has_linear_gelu(Device::cuda(0), DType::Float32));
  const Operands o = operands_in(random_operands(s, 410), DType::Float32);
  EXPECT_FALSE(fused_of(o.gpu).defined()) << "float32";
  expect_matches_reference(F::linear_gelu_linear(o.gpu[0], o.gpu[1], o.gpu[2], o.gpu[3], o.gpu[4]), o,
                           DType::Float32, "float32 (unfused)");
}

TEST(LinearGeluCuda, AutocastRunsFusedInBFloat16WithFloat32Gradients) {
  SUBLET_SKIP_WITHOUT_GPU("linear_gelu_linear under autocast");
  const MlpShape s{{3, 16}, 64, 256, 64};
  std::vector<Tensor> gpu, cpu;
  for (const Tensor& t : random_operands(s, 500)) {
    Tensor g = t.to(DType::Float32).to(Device::cuda(0));
    g.requires_grad_(true);
    Tensor c = g.detach().to(Device::cpu()).to(DType::Float64);
    c.requires_grad_(true);
    gpu.push_back(g);
    cpu.push_back(c);
  }
  const std::int64_t before = ops::linear_gelu_fallbacks();
  Tensor out;
  {
    AutocastGuard autocast(DType::BFloat16);
    out = fused_of(gpu);
  }
  ASSERT_TRUE(out.defined());
  EXPECT_EQ(out.dtype(), DType::BFloat16);
  const Tensor reference = unfused(cpu);
  Generator generator(5);
  const Tensor u = randn(reference.sizes(), generator, DType::Float64);
  reference.mul(u).sum().backward();
  out.mul(u.to(DType::BFloat16).to(Device::cuda(0))).sum().backward();
  EXPECT_EQ(ops::linear_gelu_fallbacks(), before);
  // The inputs are rounded to bfloat16 inside, so the error is bfloat16's (plus its rounding of the inputs).
  EXPECT_LE(normalized_error(out, reference), 3e-2);
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    ASSERT_TRUE(gpu[i].grad().defined()) << i;
    EXPECT_EQ(gpu[i].grad().dtype(), DType::Float32) << i;
    EXPECT_LE(normalized_error(gpu[i].grad(), cpu[i].grad()), 4e-2) << "gradient of operand " << i;
  }
}

TEST(LinearGeluCuda, GptMlpUnderAutocastRunsFusedAndMatchesItsModules) {
  SUBLET_SKIP_WITHOUT_GPU("GPT's MLP with the GELU in the epilogues");
  models::GPTConfig config;
  config.n_layer = 1;
  config.n_head = 2;
  config.n_embd = 64;
  config.block_size = 16;
  config.vocab_size = 32;
  Generator generator(7);
  models::MLP mlp(config, generator);
  mlp.to(Device::cuda(0));
  int fc_calls = 0;
  mlp.c_fc->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) { ++fc_calls; });
  const Tensor x = random64({2, 16, 64}, 600).to(DType::Float32).to(Device::cuda(0));
  const std::int64_t before = ops::linear_gelu_fallbacks();
  Tensor fused, modules;
  {
    AutocastGuard autocast(DType::BFloat16);
    fused = mlp(x);
    modules = (*mlp.c_proj)((*mlp.gelu)((*mlp.c_fc)(x)));
  }
  EXPECT_EQ(fc_calls, 1) << "only the module chain fires c_fc's hook: the fused op runs past the submodules";
  EXPECT_EQ(ops::linear_gelu_fallbacks(), before);
  EXPECT_EQ(fused.dtype(), DType::BFloat16);
  EXPECT_LE(normalized_error(fused, modules), parity_tolerance(DType::BFloat16));
}

// The op itself on a pre-activation laid out on a grid over [-6, 6]: x = 0, so pre = bias. The
// values must be the tanh GELU within float16's parity tolerance, the derivative and bias
// gradient within bfloat16's (the epilogue may use a fast tanh); where the tanh and erf forms
// differ by more than 1e-4 (around |x| = 2 to 4), the values must lie closer to the tanh form.
TEST(LinearGeluCuda, EpilogueGeluAndItsDerivativeAreTheTanhApproximation) {
  SUBLET_SKIP_WITHOUT_GPU("cuBLASLt's GELU epilogues against GPT-2's tanh formula");
  const std::int64_t m = 4, k = 8, n = 496;
  std::vector<double> grid(n);
  for (std::int64_t j = 0; j < n; ++j) grid[j] = -6.0 + 12.0 * double(j) / double(n - 1);
  const TensorOptions half = TensorOptions(DType::Float16).device(Device::cuda(0));
  const Tensor bias = Tensor::from_vector(grid, {n}, DType::Float64).to(DType::Float16).to(Device::cuda(0));
  const Tensor x = zeros({m, k}, half), w = ones({n, k}, half);
  Tensor out = Tensor::empty({m, n}, half), pre = Tensor::empty({m, n}, half);
  const ops::Context ctx = ops::Context::for_device(Device::cuda(0));
  ASSERT_TRUE(ops::linear_gelu_forward(ctx, DType::Float16, {m, k, n}, out.data_ptr(), pre.data_ptr(), x.data_ptr(),
                                       w.data_ptr(), bias.data_ptr()));
  // Backward: grad_out picks row 0 of w2 (all ones), so grad_pre = gelu'(pre) and the bias
  // gradient is m gelu'(pre).
  std::vector<double> first_column(m * k, 0.0);
  for (std::int64_t i = 0; i < m; ++i) first_column[i * k] = 1.0;
  const Tensor grad_out =
      Tensor::from_vector(first_column, {m, k}, DType::Float64).to(DType::Float16).to(Device::cuda(0));
  const Tensor w2 = ones({k, n}, half);
  Tensor grad_pre = Tensor::empty({m, n}, half), grad_bias = Tensor::empty({n}, half);
  ASSERT_TRUE(ops::linear_gelu_backward(ctx, DType::Float16, {m, k, n}, grad_pre.data_ptr(), grad_bias.data_ptr(),
                                        grad_out.data_ptr(), w2.data_ptr(), pre.data_ptr()));
  const auto b = bias.to(Device::cpu()).to(DType::Float64).to_vector<double>();
  std::vector<double> bias_rows(m * n), value(m * n), slope(m * n), erf_value(m * n), bias_slope(n);
  using ops::GeluApproximate;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      bias_rows[i * n + j] = b[j];
      value[i * n + j] = ops::gelu_math::value(b[j], GeluApproximate::Tanh);
      erf_value[i * n + j] = ops::gelu_math::value(b[j], GeluApproximate::None);
      slope[i * n + j] = ops::gelu_math::derivative(b[j], GeluApproximate::Tanh);
    }
  }
  for (std::int64_t j = 0; j < n; ++j) bias_slope[j] = double(m) * slope[j];
  const auto on_cpu = [](const std::vector<double>& v, const Shape& sizes) {
    return Tensor::from_vector(v, sizes, DType::Float64);
  };
  EXPECT_EQ(normalized_error(pre, on_cpu(bias_rows, {m, n})), 0.0) << "the pre-activation is the bias";
  EXPECT_LE(normalized_error(out, on_cpu(value, {m, n})), parity_tolerance(DType::Float16)) << "gelu";
  EXPECT_LE(normalized_error(grad_pre, on_cpu(slope, {m, n})), parity_tolerance(DType::BFloat16)) << "gelu'";
  EXPECT_LE(normalized_error(grad_bias, on_cpu(bias_slope, {n})), parity_tolerance(DType::BFloat16)) << "bias gradient";

  const auto y = out.to(Device::cpu()).to(DType::Float64).to_vector<double>();
  double off_tanh = 0, off_erf = 0;
  int distinguishable = 0;
  for (std::size_t at = 0; at < y.size(); ++at) {
    if (std::fabs(value[at] - erf_value[at]) <= 1e-4) continue;
    ++distinguishable;
    off_tanh += std::fabs(y[at] - value[at]);
    off_erf += std::fabs(y[at] - erf_value[at]);
  }
  ASSERT_GT(distinguishable, 40);
  EXPECT_LT(off_tanh, off_erf) << "summed distance to the tanh GELU against the erf GELU";
}

}  // namespace
}  // namespace sublet
