// The CUDA multi-tensor updates against the CPU ones: same parameters and gradients (drawn on
// the host, copied), five steps with a learning-rate change and a parameter that misses one
// update. Tolerance: 1e-5 relative in float32 (nvcc contracts a*b+c into FMAs and the device
// pow/sqrt round differently from the host's; five steps of a few roundings each), 1e-12 in
// float64.
#include <gtest/gtest.h>

#include "fused_optim_support.h"
#include "memory/registry.h"
#include "ops/optim_update.h"
#include "runtime/optim/adam.h"
#include "runtime/optim/sgd.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

double cpu_vs_cuda(DType dtype, const MakeOptimizer& make) {
  const auto shapes = testing::fused_test_shapes();
  auto on_cpu = testing::make_params(shapes, dtype, Device::cpu(), 21);
  auto on_gpu = testing::make_params(shapes, dtype, Device::cuda(0), 21);
  auto cpu_opt = make(on_cpu);
  auto gpu_opt = make(on_gpu);
  for (int step = 0; step < 5; ++step) {
    const std::int64_t skip = step == 2 ? 4 : -1;
    testing::set_random_grads(on_cpu, 300 + step, skip);
    testing::set_random_grads(on_gpu, 300 + step, skip);
    if (step == 3) {  // a schedule's change must reach the kernel through the device scalars
      cpu_opt->set_lr(cpu_opt->lr() * 0.5);
      gpu_opt->set_lr(gpu_opt->lr() * 0.5);
    }
    cpu_opt->step();
    gpu_opt->step();
  }
  // Parameter groups launch once per weight decay: the step count still advances once a step.
  EXPECT_EQ(gpu_opt->step_count(), cpu_opt->step_count());
  EXPECT_EQ(gpu_opt->step_count(), 5);
  return testing::max_relative_difference(on_gpu, on_cpu);
}

std::vector<std::pair<const char*, MakeOptimizer>> cases() {
  return {
      {"sgd momentum", [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(std::move(p),
                                             optim::SGDOptions(0.05).momentum(0.9).dampening(0.1).weight_decay(5e-4));
       }},
      {"sgd nesterov", [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
       }},
      {"adam l2", [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions(1e-2).weight_decay(0.1));
       }},
      {"adamw", [](std::vector<Tensor> p) {
         return std::make_unique<optim::AdamW>(std::move(p), optim::AdamOptions(1e-2).weight_decay(0.05));
       }},
      {"adamw parameter groups", [](std::vector<Tensor> p) {  // nanoGPT's: decay on some, none on the rest
         std::vector<optim::AdamParamGroup> groups{{{}, 0.1}, {{}, 0.0}};
         for (std::size_t i = 0; i < p.size(); ++i) groups[i % 2].params.push_back(p[i]);
         return std::make_unique<optim::AdamW>(std::move(groups), optim::AdamOptions(1e-2).betas(0.9, 0.95));
       }},
  };
}

TEST(FusedOptimCuda, Float32MatchesCpu) {
  SUBLET_SKIP_WITHOUT_GPU("CUDA fused SGD/Adam vs the CPU fused updates");
  for (const auto& [name, make] : cases()) EXPECT_LE(cpu_vs_cuda(DType::Float32, make), 1e-5) << name;
}

TEST(FusedOptimCuda, Float64MatchesCpu) {
  SUBLET_SKIP_WITHOUT_GPU("CUDA fused updates in float64 vs the CPU");
  for (const auto& [name, make] : cases()) EXPECT_LE(cpu_vs_cuda(DType::Float64, make), 1e-12) << name;
}

TEST(FusedOptimCuda, HostAndDeviceScalarsAgree) {
  // ops-level: the same Adam update with lr/t passed per launch and read from device memory.
  SUBLET_SKIP_WITHOUT_GPU("adam_update with host vs device scalars");
  const Device gpu = Device::cuda(0);
  auto a = testing::make_params(testing::fused_test_shapes(), DType::Float32, gpu, 5);
  auto b = testing::make_params(testing::fused_test_shapes(), DType::Float32, gpu, 5);
  testing::set_random_grads(a, 6);
  testing::set_random_grads(b, 6);
  std::vector<Tensor> keep;  // moments
  auto tensors_for = [&](std::vector<Tensor>& params, bool with_slots) {
    std::vector<ops::AdamTensor> out;
    for (std::size_t i = 0; i < params.size(); ++i) {
      Tensor m = zeros(params[i].sizes(), params[i].options());
      Tensor v = zeros(params[i].sizes(), params[i].options());
      keep.push_back(m);
      keep.push_back(v);
      ops::AdamTensor t;
      t.param = params[i].data_ptr();
      t.grad = params[i].grad().data_ptr();
      t.exp_avg = m.data_ptr();
      t.exp_avg_sq = v.data_ptr();
      t.numel = params[i].numel();
      t.step = static_cast<std::int64_t>(1 + i);  // a different bias correction per tensor
      if (with_slots) t.step_slot = static_cast<std::int64_t>(params.size() - 1 - i);  // reversed on purpose
      out.push_back(t);
    }
    return out;
  };
  const ops::Context ctx = ops::Context::for_device(gpu);
  const ops::AdamHyper hyper{0.9, 0.999, 1e-8, 0.0, false};
  ops::adam_update(ctx, DType::Float32, tensors_for(a, false), hyper, ops::UpdateScalars{2e-3, nullptr});
  Tensor scalars = Tensor::empty({static_cast<std::int64_t>(b.size()) + 1}, TensorOptions().dtype(DType::Float64).device(gpu));
  std::vector<double> host(b.size() + 1);
  host[0] = 2e-3;
  for (std::size_t i = 0; i < b.size(); ++i) host[1 + (b.size() - 1 - i)] = static_cast<double>(1 + i);
  ops::write_update_scalars(ctx, scalars.data<double>(), host.data(), static_cast<std::int64_t>(host.size()));
  host.assign(host.size(), -1.0);  // the copy must not read the host array after returning
  ops::adam_update(ctx, DType::Float32, tensors_for(b, true), hyper, ops::UpdateScalars{0.0, scalars.data<double>()});
  EXPECT_EQ(testing::max_relative_difference(a, b), 0.0);
  auto before = testing::make_params(testing::fused_test_shapes(), DType::Float32, gpu, 5);
  EXPECT_GT(testing::max_relative_difference(a, before), 1e-4);  // something moved
}

}  // namespace
}  // namespace sublet
