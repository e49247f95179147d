// GPT's block on CUDA under bfloat16 autocast, where ln_1 writes bfloat16 itself and the
// attention's residual add runs fused with ln_2, against the same block run as the unfused ops
// (x + attn(ln_1(x)), then h + mlp(ln_2(h))): the same output bits, and the same gradients of the
// input and every parameter (up to the attention backward's own run-to-run rounding). The whole
// model, whose block boundaries (the MLP's residual add with the next ln_1 or ln_f) run fused,
// against the unfused ops the same way, against itself with recomputed blocks (boundaries closed),
// and against SUBLET_NO_FUSED_LAYER_NORM's path to 16-bit rounding, in forward and KV-cache forward.
// A GPU-only binary: run it on the GPU machine with SUBLET_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "core/tuning.h"
#include "models/gpt.h"
#include "runtime/autocast.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
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


Tensor random_ids(std::int64_t batch, std::int64_t tokens, std::int64_t vocab, Generator& generator) {
  const std::vector<float> u = rand({batch, tokens}, generator).to_vector<float>();
  Tensor ids = empty({batch, tokens}, DType::Int64);
  for (std::size_t i = 0; i < u.size(); ++i)
    ids.data<std::int64_t>()[i] = std::min<std::int64_t>(vocab - 1, static_cast<std::int64_t>(u[i] * vocab));
  return ids.to(Device::cuda(0));
}

GPTConfig model_config() {
  GPTConfig config;
  config.n_layer = 3;
  config.n_head = 4;
  config.n_embd = 128;
  config.block_size = 64;
  config.vocab_size = 101;
  config.seed = 11;
  return config;
}

// Every layer norm's parameters away from ones and zeros, then the model on the GPU.
void prepare(GPT& model) {
  Generator generator(7);
  NoGradGuard no_grad;
  for (auto& [name, p] : model.named_parameters()) {
    if (name.find(".ln_") == std::string::npos) continue;
    const bool weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
    p.copy_(randn(p.sizes(), generator).mul(weight ? 0.2 : 0.1).add(weight ? 1.0 : 0.0));
  }
  model.to(Device::cuda(0));
}

// GPT's forward written as the unfused ops, each residual add its own op.
Tensor unfused_forward(GPT& model, const Tensor& ids) {
  GPTBody& t = *model.transformer;
  Tensor x = (*t.wte)(ids) + t.wpe->weight.narrow(0, 0, ids.size(1));
  for (std::size_t i = 0; i < t.h->size(); ++i) {
    Block& block = static_cast<Block&>(*(*t.h)[i]);
    const Tensor h = x + (*block.attn)((*block.ln_1)(x));
    x = h + (*block.mlp)((*block.ln_2)(h));
  }
  return nn::functional::linear((*t.ln_f)(x), t.wte->weight);
}

enum class Path { Fused, UnfusedOps, Recomputed };

BlockRun run_model(GPT& model, const Tensor& ids, const Tensor& upstream, Path path) {
  model.zero_grad();
  model.set_recompute_blocks(path == Path::Recomputed ? std::vector<nn::Sequential::Run>{{0, 2}}
                                                      : std::vector<nn::Sequential::Run>{});
  Tensor logits;
  {
    AutocastGuard autocast(DType::BFloat16);
    logits = path == Path::UnfusedOps ? unfused_forward(model, ids) : model(ids);
  }
  EXPECT_EQ(logits.dtype(), DType::BFloat16);
  logits.backward(upstream.to(logits.dtype()));
  BlockRun run{logits.detach().to(DType::Float32).to(Device::cpu()).to_vector<float>(), {}};
  for (const Tensor& p : model.parameters()) {
    run.grads.push_back(p.grad().to(DType::Float32).to(Device::cpu()).to_vector<float>());
  }
  model.set_recompute_blocks({});
  return run;
}

TEST(GPTModelCuda, FusedBlockBoundariesGiveTheUnfusedOpsResults) {
  SUBLET_SKIP_WITHOUT_GPU("GPT with fused block boundaries against the unfused ops");
  GPT model(model_config());
  prepare(model);
  Generator generator(5);
  const Tensor ids = random_ids(2, 61, model_config().vocab_size, generator);
  const Tensor upstream = randn({2, 61, model_config().vocab_size}, generator).to(Device::cuda(0));
  const BlockRun fused = run_model(model, ids, upstream, Path::Fused);
  for (Path other : {Path::UnfusedOps, Path::Recomputed}) {
    const BlockRun reference = run_model(model, ids, upstream, other);
    const char* name = other == Path::UnfusedOps ? "unfused ops" : "recomputed blocks";
    EXPECT_EQ(fused.output, reference.output) << name;
    ASSERT_EQ(fused.grads.size(), reference.grads.size());
    for (std::size_t i = 0; i < fused.grads.size(); ++i) {
      EXPECT_LE(relative_difference(fused.grads[i], reference.grads[i]), 1e-4) << name << ", parameter " << i;
    }
  }
}

TEST(GPTModelCuda, FusedLayerNormsOffAgreesToRounding) {
  SUBLET_SKIP_WITHOUT_GPU("GPT with fused layer norms against SUBLET_NO_FUSED_LAYER_NORM's path");
  GPT model(model_config());
  prepare(model);
  model.eval();
  Generator generator(9);
  const Tensor ids = random_ids(2, 40, model_config().vocab_size, generator);
  const Tensor upstream = randn({2, 40, model_config().vocab_size}, generator).to(Device::cuda(0));
  const BlockRun fused = run_model(model, ids, upstream, Path::Fused);
  BlockRun off;
  std::vector<float> fused_cached, off_cached;
  auto cached = [&]() {
    AutocastGuard autocast(DType::BFloat16);
    KVCache cache;
    Tensor logits = model.forward_cached(ids.narrow(1, 0, 39).contiguous(), cache);
    logits = model.forward_cached(ids.narrow(1, 39, 1).contiguous(), cache);
    return logits.to(DType::Float32).to(Device::cpu()).to_vector<float>();
  };
  fused_cached = cached();
  {
    ScopedTuning unfused([](TuningOptions& o) { o.fused_layer_norm = false; });
    off = run_model(model, ids, upstream, Path::Fused);
    off_cached = cached();
  }
  EXPECT_LE(relative_difference(fused.output, off.output), 2e-2);
  EXPECT_LE(relative_difference(fused_cached, off_cached), 2e-2);
  for (std::size_t i = 0; i < fused.grads.size(); ++i) {
    EXPECT_LE(relative_difference(fused.grads[i], off.grads[i]), 5e-2) << "parameter " << i;
  }
  // The cached run's last token has the full forward's logits at that position.
  const auto vocab = static_cast<std::ptrdiff_t>(model_config().vocab_size);
  std::vector<float> last;
  for (std::ptrdiff_t b = 0; b < 2; ++b) {
    const auto row = fused.output.begin() + (b * 40 + 39) * vocab;
    last.insert(last.end(), row, row + vocab);
  }
  EXPECT_LE(relative_difference(fused_cached, last), 2e-2);
}

}  // namespace
}  // namespace sublet::models
