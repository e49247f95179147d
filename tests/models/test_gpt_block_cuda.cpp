// GPT's block on CUDA under bfloat16 autocast, where ln_1 writes bfloat16 itself and the
// attention's residual add runs fused with ln_2, against the same block run as the unfused ops
// (x + attn(ln_1(x)), then h + mlp(ln_2(h))): the same output bits, and the same gradients of the
// input and every parameter (up to the attention backward's own run-to-run rounding).
// A GPU-only binary: run it on the GPU machine with SUBLET_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "models/gpt.h"
#include "runtime/autocast.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"
#include "tests/gpu_skip.h"

namespace sublet::models {
namespace {

struct BlockRun {
  std::vector<float> output;
  std::vector<std::vector<float>> grads;  // the input's, then each parameter's
};

BlockRun run_block(Block& block, const Tensor& input, const Tensor& upstream, bool fused) {
  block.zero_grad();
  Tensor x = input.detach();
  x.requires_grad_(true);
  Tensor y;
  {
    AutocastGuard autocast(DType::BFloat16);
    if (fused) {
      y = block.forward(x);
    } else {
      const Tensor h = x + (*block.attn)((*block.ln_1)(x));
      y = h + (*block.mlp)((*block.ln_2)(h));
    }
  }
  y.backward(upstream);
  BlockRun run{y.detach().to(DType::Float32).to(Device::cpu()).to_vector<float>(), {}};
  run.grads.push_back(x.grad().to(DType::Float32).to(Device::cpu()).to_vector<float>());
  for (const Tensor& p : block.parameters()) {
    run.grads.push_back(p.grad().to(DType::Float32).to(Device::cpu()).to_vector<float>());
  }
  return run;
}

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return NAN;
  double scale = 0, worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    scale = std::fmax(scale, std::fabs(b[i]));
    worst = std::fmax(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return worst / std::fmax(scale, 1e-30);
}

TEST(GPTBlockCuda, FusedNormsGiveTheUnfusedOpsResults) {
  SUBLET_SKIP_WITHOUT_GPU("GPT block with fused layer norms against the unfused ops");
  GPTConfig config;
  config.n_layer = 1;
  config.n_head = 4;
  config.n_embd = 128;
  config.block_size = 64;
  config.vocab_size = 100;
  Generator generator(3);
  Block block(config, generator);
  {
    NoGradGuard no_grad;  // layer norm parameters away from ones and zeros
    for (const auto& ln : {block.ln_1, block.ln_2}) {
      ln->weight.copy_(randn({config.n_embd}, generator).mul(0.2).add(1.0));
      ln->bias.copy_(randn({config.n_embd}, generator).mul(0.1));
    }
  }
  block.to(Device::cuda(0));
  const Tensor x = randn({2, 64, config.n_embd}, generator).mul(2.0).add(0.5).to(Device::cuda(0));
  const Tensor upstream = randn({2, 64, config.n_embd}, generator).to(Device::cuda(0));
  const BlockRun fused = run_block(block, x, upstream, true);
  const BlockRun unfused = run_block(block, x, upstream, false);
  EXPECT_EQ(fused.output, unfused.output);
  ASSERT_EQ(fused.grads.size(), unfused.grads.size());
  for (std::size_t i = 0; i < fused.grads.size(); ++i) {
    EXPECT_LE(relative_difference(fused.grads[i], unfused.grads[i]), 1e-5) << "gradient " << i;
  }
}

}  // namespace
}  // namespace sublet::models
