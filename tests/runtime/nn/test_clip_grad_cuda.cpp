// nn::utils::clip_grad_norm_tensor_ on CUDA gradients through the multi-tensor kernels: mixed
// float32/bfloat16/float16 lists against the CPU, the scale exactly as PyTorch's formula gives
// it from the returned norm, the whole clip of 148 gradients (GPT-2 small's parameter count) as
// five kernels, and the clip captured into a CUDA graph and replayed on new gradient values.
#include "runtime/nn/clip_grad.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/factories.h"
#include "runtime/step/cuda_graph.h"
#include "tests/gpu_skip.h"
#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

using testing::random64;

struct Params {
  std::vector<Tensor> params;
};

// Parameters on `device` whose gradients have the given dtypes and sizes (seeded values).
Params make_params(const std::vector<std::pair<DType, std::int64_t>>& specs, std::uint64_t seed, Device device) {
  Params p;
  for (const auto& [dtype, numel] : specs) {
    Tensor t = zeros({numel}, TensorOptions().dtype(dtype).device(device));
    t.requires_grad_(true);
    t.set_grad(random64({numel}, seed++).mul(2.0).to(dtype).to(device));
    p.params.push_back(t);
  }
  return p;
}

std::vector<std::pair<DType, std::int64_t>> mixed_specs() {
  return {{DType::Float32, 8193}, {DType::BFloat16, 7}, {DType::Float16, 100003}, {DType::Float32, 1},
          {DType::BFloat16, 16384}, {DType::Float32, (std::int64_t{1} << 24) + 3}};
}

// Each gradient as the scale writes it from `norm`: the coefficient (1 / (norm + 1e-6)) *
// max_norm in float32, clamped to 1, rounded to the gradient's dtype, the product in float32.
void expect_scaled_from(const std::vector<Tensor>& before, const Params& after, float norm, double max_norm) {
  float coefficient = (1.0f / (norm + 1e-6f)) * static_cast<float>(max_norm);
  coefficient = coefficient < 1.0f ? coefficient : 1.0f;
  for (std::size_t i = 0; i < before.size(); ++i) {
    const Tensor g = after.params[i].grad();
    const Tensor c = full({}, coefficient).to(g.dtype()).to(DType::Float32);
    const Tensor expected = before[i].to(DType::Float32).mul(c).to(g.dtype());
    EXPECT_EQ(g.to(Device::cpu()).to_vector<double>(), expected.to_vector<double>()) << "parameter " << i << " (" << dtype_name(g.dtype()) << ")";
  }
}

std::vector<Tensor> cpu_copies(const Params& p) {
  std::vector<Tensor> out;
  for (const Tensor& t : p.params) out.push_back(t.grad().to(Device::cpu()).clone());
  return out;
}

TEST(ClipGradNormCuda, MixedDtypesMatchTheCpuAndScaleExactly) {
  SUBLET_SKIP_WITHOUT_GPU("clip_grad_norm_ of float32/bfloat16/float16 CUDA gradients against the CPU");
  for (double norm_type : {2.0, 1.0, 3.0, std::numeric_limits<double>::infinity()}) {
    SCOPED_TRACE("norm_type " + std::to_string(norm_type));
    Params gpu = make_params(mixed_specs(), 70, Device::cuda(0));
    Params cpu = make_params(mixed_specs(), 70, Device::cpu());
    const std::vector<Tensor> before = cpu_copies(gpu);
    const double expected = nn::utils::clip_grad_norm_(cpu.params, 1e9, norm_type);  // no clipping
    const double max_norm = expected / 4;
    const Tensor norm = nn::utils::clip_grad_norm_tensor_(gpu.params, max_norm, norm_type);
    EXPECT_TRUE(norm.device().is_cuda());
    EXPECT_EQ(norm.dtype(), DType::Float32);
    EXPECT_NEAR(norm.item<double>(), expected, 1e-6 * expected);
    expect_scaled_from(before, gpu, norm.item<float>(), max_norm);
  }
}

TEST(ClipGradNormCuda, BelowMaxNormLeavesTheGradientsAlone) {
  SUBLET_SKIP_WITHOUT_GPU("clip_grad_norm_ of CUDA gradients below max_norm");
  Params gpu = make_params(mixed_specs(), 80, Device::cuda(0));
  const std::vector<Tensor> before = cpu_copies(gpu);
  const double norm = nn::utils::clip_grad_norm_(gpu.params, 1e9);
  EXPECT_GT(norm, 0.0);
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_EQ(gpu.params[i].grad().to(Device::cpu()).to_vector<double>(), before[i].to_vector<double>());
}

// 148 gradients, as GPT-2 small's parameters: the table upload, the partials and the finish of
// the norm, the table upload and the scale. Five kernels, however many gradients (up to 160).
TEST(ClipGradNormCuda, ClippingAGpt2SizedListIsFiveKernelsAndReplaysInAGraph) {
  SUBLET_SKIP_WITHOUT_GPU("clip_grad_norm_ captured into a CUDA graph");
  std::vector<std::pair<DType, std::int64_t>> specs;
  for (int i = 0; i < 148; ++i) specs.push_back({DType::Float32, 1 + 997 * (i % 13)});
  Params gpu = make_params(specs, 90, Device::cuda(0));
  (void)nn::utils::clip_grad_norm_tensor_(gpu.params, 1.0);  // eager first, as any captured step
  CudaGraph graph(Device::cuda(0));
  Tensor norm;
  graph.capture([&] { norm = nn::utils::clip_grad_norm_tensor_(gpu.params, 1.0); });
  EXPECT_EQ(graph.node_count(), 5u);
  for (std::uint64_t round = 0; round < 2; ++round) {
    Params fresh = make_params(specs, 200 + 1000 * round, Device::cpu());
    for (std::size_t i = 0; i < specs.size(); ++i) gpu.params[i].grad().copy_(fresh.params[i].grad());
    const std::vector<Tensor> before = cpu_copies(fresh);
    const double expected = nn::utils::clip_grad_norm_(fresh.params, 1e9);
    ASSERT_GT(expected, 1.0) << "the replay must clip";
    graph.replay();
    graph.synchronize();
    EXPECT_NEAR(norm.item<double>(), expected, 1e-6 * expected) << "replay " << round;
    expect_scaled_from(before, gpu, norm.item<float>(), 1.0);
  }
}

}  // namespace
}  // namespace sublet
