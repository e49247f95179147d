// nn::functional::batch_norm_relu on the GPU: the fused kernels' gradients against float64 finite
// differences (the inputs cross to the device inside the checked function), their values and
// gradients against the CPU composition in float32 at a ResNet-18 layer size, and the composed
// path the GPU takes for channels too large for the fused kernels.
#include <gtest/gtest.h>

#include <string>

#include "memory/registry.h"
#include "ops/batch_norm_relu.h"
#include "runtime/factories.h"
#include "runtime/gradcheck.h"
#include "runtime/nn/functional.h"
#include "runtime_test_util.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

namespace F = nn::functional;

const Device kGpu = Device::cuda(0);

double max_abs(const Tensor& a) {
  return a.to(Device::cpu()).to(DType::Float64).pow(2.0).max().sqrt().item<double>();
}

double max_abs_difference(const Tensor& a, const Tensor& b) { return max_abs(a.to(Device::cpu()).sub(b.to(Device::cpu()))); }

struct Result {
  Tensor out, grad_input, grad_weight, grad_bias, grad_residual, running_mean, running_var;
};

// batch_norm_relu with running statistics on `device`, then the backward of sum(out * g).
Result run(Device device, const Tensor& x, const Tensor& residual, const Tensor& w, const Tensor& b, const Tensor& g) {
  auto leaf = [&](const Tensor& t) { return t.to(device).detach().requires_grad_(true); };
  Tensor xd = leaf(x), rd = leaf(residual), wd = leaf(w), bd = leaf(b);
  Result r;
  r.running_mean = zeros({x.size(1)}, TensorOptions().dtype(x.dtype()).device(device));
  r.running_var = ones({x.size(1)}, TensorOptions().dtype(x.dtype()).device(device));
  r.out = F::batch_norm_relu(xd, rd, r.running_mean, r.running_var, wd, bd, /*training=*/true, 0.1, 1e-5);
  r.out.mul(g.to(device)).sum().backward();
  r.grad_input = xd.grad();
  r.grad_weight = wd.grad();
  r.grad_bias = bd.grad();
  r.grad_residual = rd.grad();
  return r;
}

void expect_same(const Result& gpu, const Result& cpu, double tolerance, const std::string& what) {
  const std::pair<const char*, std::pair<Tensor, Tensor>> fields[] = {
      {"output", {gpu.out, cpu.out}},
      {"grad_input", {gpu.grad_input, cpu.grad_input}},
      {"grad_weight", {gpu.grad_weight, cpu.grad_weight}},
      {"grad_bias", {gpu.grad_bias, cpu.grad_bias}},
      {"grad_residual", {gpu.grad_residual, cpu.grad_residual}},
      {"running_mean", {gpu.running_mean, cpu.running_mean}},
      {"running_var", {gpu.running_var, cpu.running_var}}};
  for (const auto& [name, pair] : fields) {
    ASSERT_TRUE(pair.first.defined() && pair.second.defined()) << what << " " << name;
    EXPECT_LE(max_abs_difference(pair.first, pair.second), tolerance * std::max(1.0, max_abs(pair.second)))
        << what << " " << name;
  }
}

TEST(BatchNormReluCuda, FusedGradientsMatchFiniteDifferences) {
  SUBLET_SKIP_WITHOUT_GPU("gradcheck of the fused batch norm + ReLU kernels");
  const Tensor x = testing::random64({3, 2, 4, 3}, 50, true), r = testing::random64({3, 2, 4, 3}, 51, true);
  const Tensor w = testing::random64({2}, 52, true), b = testing::random64({2}, 53, true);
  ASSERT_TRUE(ops::batch_norm_relu_fused(ops::Context::for_device(kGpu), {3, 2, 4, 3}, DType::Float64));
  const GradcheckResult report = gradcheck_report(
      [&](const std::vector<Tensor>& in) {
        return F::batch_norm_relu(in[0].to(kGpu), in[3].to(kGpu), Tensor(), Tensor(), in[1].to(kGpu), in[2].to(kGpu),
                                  /*training=*/true)
            .to(Device::cpu());
      },
      {x, w, b, r});
  EXPECT_LE(report.max_error, 1e-6) << report.worst;
}

// Float32 at ResNet-18's layer2 size (batch 128, 4x4): the fused path against the CPU's composed
// one. Tolerance 1e-4 of each tensor's largest value (cuDNN-free float32 against the CPU's
// double-accumulated kernels; the ReLU mask can differ only where a value rounds to 0).
TEST(BatchNormReluCuda, FusedMatchesTheCpuCompositionAtResNetSizes) {
  SUBLET_SKIP_WITHOUT_GPU("fused batch norm + ReLU against the CPU");
  const Shape shape{128, 128, 4, 4};
  ASSERT_TRUE(ops::batch_norm_relu_fused(ops::Context::for_device(kGpu), {128, 128, 4, 4}, DType::Float32));
  const Tensor x = testing::random32(shape, 54), residual = testing::random32(shape, 55);
  const Tensor w = testing::random32({128}, 56).add(1.0f), b = testing::random32({128}, 57), g = testing::random32(shape, 58);
  expect_same(run(kGpu, x, residual, w, b, g), run(Device::cpu(), x, residual, w, b, g), 1e-4, "[128, 128, 4, 4]");
}

// 128 * 8 * 8 = 8192 values per channel (ResNet-18's layer1): beyond the fused kernels, so the GPU
// composes cuDNN's batch norm, the add and the ReLU; the same results as the CPU.
TEST(BatchNormReluCuda, LargeChannelsTakeTheComposedPathWithTheSameResults) {
  SUBLET_SKIP_WITHOUT_GPU("the composed GPU path of batch_norm_relu");
  const Shape shape{128, 2, 8, 8};
  ASSERT_FALSE(ops::batch_norm_relu_fused(ops::Context::for_device(kGpu), {128, 2, 8, 8}, DType::Float32));
  const Tensor x = testing::random32(shape, 59), residual = testing::random32(shape, 60);
  const Tensor w = testing::random32({2}, 61).add(1.0f), b = testing::random32({2}, 62), g = testing::random32(shape, 63);
  expect_same(run(kGpu, x, residual, w, b, g), run(Device::cpu(), x, residual, w, b, g), 1e-4, "[128, 2, 8, 8]");
}

}  // namespace
}  // namespace sublet
