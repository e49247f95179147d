// models/gpt.h and models/gpt_export.h: nanoGPT's names and init, causality, the KV-cache path
// against the full forward, the tied head's gradient against finite differences, the weights file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/tuning.h"
#include "models/gpt.h"
#include "models/gpt_export.h"
#include "models/registry.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"
#include "runtime/io/safetensors.h"
#include "runtime/nn/functional.h"

namespace sublet {
namespace {

namespace fs = std::filesystem;
using models::GPT;
using models::GPTConfig;

GPTConfig tiny_config(std::int64_t vocab = 13) {
  GPTConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.block_size = 12;
  c.vocab_size = vocab;
  c.seed = 5;
  return c;
}

Tensor random_ids(std::int64_t batch, std::int64_t tokens, std::int64_t vocab, std::uint64_t seed) {
  Generator gen(seed);
  const Tensor u = rand({batch, tokens}, gen);
  std::vector<float> values = u.to_vector<float>();
  Tensor ids = empty({batch, tokens}, DType::Int64);
  for (std::size_t i = 0; i < values.size(); ++i)
    ids.data<std::int64_t>()[i] = std::min<std::int64_t>(vocab - 1, static_cast<std::int64_t>(values[i] * vocab));
  return ids;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  if (x.size() != y.size()) return std::nan("");
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = std::abs(x[i] - y[i]);
    if (!(d <= worst)) worst = d;  // a NaN stays
  }
  return worst;
}

TEST(GPT, ParameterNamesAreNanoGPTs) {
  GPT model(tiny_config());
  std::vector<std::string> expected = {"transformer.wte.weight", "transformer.wpe.weight"};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    for (const char* leaf : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                             "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",
                             "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"})
      expected.push_back(p + leaf);
  }
  expected.push_back("transformer.ln_f.weight");
  expected.push_back("transformer.ln_f.bias");
  std::vector<std::string> names;
  for (const auto& [name, tensor] : model.state_dict()) names.push_back(name);
  EXPECT_EQ(names, expected);
  // The tied head: the file's names add lm_head.weight, the very same tensor.
  const auto exported = models::nanogpt_state_dict(model);
  ASSERT_EQ(exported.back().first, "lm_head.weight");
  EXPECT_TRUE(exported.back().second.is_same(model.transformer->wte->weight));
}

TEST(GPT, ConfigsAndParameterCounts) {
  const GPTConfig small = models::gpt_config("gpt2-small", 50304);
  EXPECT_EQ(small.n_layer, 12);
  EXPECT_EQ(small.n_embd, 768);
  EXPECT_EQ(small.block_size, 1024);
  // GPT-2 124M: per block 12 C^2 + 13 C, embeddings (V + T) C, final norm 2 C.
  const std::int64_t c = small.n_embd;
  const std::int64_t expected_small = small.n_layer * (12 * c * c + 13 * c) + (50304 + 1024) * c + 2 * c;
  EXPECT_EQ(expected_small, 124'475'904);
  const GPTConfig nano = models::gpt_config("gpt-nano", 256);
  EXPECT_EQ(nano.n_layer, 3);
  EXPECT_EQ(nano.n_head, 3);
  EXPECT_EQ(nano.n_embd, 48);
  EXPECT_EQ(nano.block_size, 64);
  GPT model(nano);
  const std::int64_t n = nano.n_embd;
  EXPECT_EQ(model.num_parameters(), nano.n_layer * (12 * n * n + 13 * n) + (256 + 64) * n + 2 * n);
  EXPECT_EQ(model.num_parameters(false), model.num_parameters() - 64 * n);
  EXPECT_EQ(model.decay_parameters().size() + model.no_decay_parameters().size(), model.parameters().size());
  for (const Tensor& p : model.decay_parameters()) EXPECT_EQ(p.dim(), 2);
  EXPECT_THROW(models::gpt_config("gpt-huge", 256), ValueError);
  EXPECT_THROW(models::gpt_config("gpt-nano", 0), ValueError);
}

// nanoGPT's init: std 0.02, residual projections 0.02 / sqrt(2 n_layer), biases 0, norms 1/0.
TEST(GPT, InitialisationIsNanoGPTs) {
  GPTConfig config = models::gpt_config("gpt-mini", 256);
  config.seed = 3;
  GPT model(config);
  auto std_of = [](const Tensor& t) {
    const std::vector<double> v = t.to_vector<double>();
    double sum = 0, sq = 0;
    for (double x : v) sum += x, sq += x * x;
    const double mean = sum / static_cast<double>(v.size());
    return std::sqrt(sq / static_cast<double>(v.size()) - mean * mean);
  };
  auto& block = static_cast<models::Block&>(*(*model.transformer->h)[0]);
  EXPECT_NEAR(std_of(model.transformer->wte->weight), 0.02, 0.001);
  EXPECT_NEAR(std_of(block.attn->c_attn->weight), 0.02, 0.001);
  EXPECT_NEAR(std_of(block.mlp->c_proj->weight), 0.02 / std::sqrt(12.0), 0.0005);
  EXPECT_NEAR(std_of(block.attn->c_proj->weight), 0.02 / std::sqrt(12.0), 0.0005);
  for (double b : block.attn->c_attn->bias.to_vector<double>()) EXPECT_EQ(b, 0.0);
  for (double w : model.transformer->ln_f->weight.to_vector<double>()) EXPECT_EQ(w, 1.0);
}

TEST(GPT, LogitsAtAPositionIgnoreLaterTokens) {
  GPT model(tiny_config());
  NoGradGuard no_grad;
  const Tensor ids = random_ids(2, 10, 13, 1);
  const Tensor logits = model(ids);
  ASSERT_EQ(std::vector<std::int64_t>(logits.sizes().begin(), logits.sizes().end()),
            (std::vector<std::int64_t>{2, 10, 13}));
  // Change the token at position 6: positions 0..5 must not move, position 6 must.
  Tensor changed = ids.clone();
  for (std::int64_t b = 0; b < 2; ++b) {
    std::int64_t& id = changed.data<std::int64_t>()[b * 10 + 6];
    id = (id + 5) % 13;
  }
  const Tensor other = model(changed);
  EXPECT_TRUE(max_abs_diff(logits.narrow(1, 0, 6), other.narrow(1, 0, 6)) <= 0.0);
  EXPECT_TRUE(max_abs_diff(logits.narrow(1, 6, 1), other.narrow(1, 6, 1)) >= 1e-4);
}

TEST(GPT, KvCacheGivesTheFullForwardsLogits) {
  GPT model(tiny_config());
  model.eval();
  NoGradGuard no_grad;
  const Tensor ids = random_ids(2, 12, 13, 2);
  const Tensor full = model(ids);
  models::KVCache cache;
  const std::int64_t prompt = 5;
  const Tensor first = model.forward_cached(ids.narrow(1, 0, prompt).contiguous(), cache);
  EXPECT_EQ(cache.length(), prompt);
  EXPECT_TRUE(max_abs_diff(first, full.narrow(1, 0, prompt)) <= 1e-5);
  for (std::int64_t t = prompt; t < 12; ++t) {
    const Tensor step = model.forward_cached(ids.narrow(1, t, 1).contiguous(), cache);
    EXPECT_TRUE(max_abs_diff(step, full.narrow(1, t, 1)) <= 1e-5) << "position " << t;
  }
  // The context is full: one more token is refused with a clear error.
  EXPECT_THROW(model.forward_cached(ids.narrow(1, 0, 1).contiguous(), cache), ValueError);
  // Several tokens after the prompt are refused (the cache takes one at a time).
  cache.clear();
  model.forward_cached(ids.narrow(1, 0, 3).contiguous(), cache);
  EXPECT_THROW(model.forward_cached(ids.narrow(1, 3, 2).contiguous(), cache), ValueError);
  // Cleared and reused for a new prompt: the same logits again.
  cache.clear();
  EXPECT_TRUE(max_abs_diff(model.forward_cached(ids.narrow(1, 0, prompt).contiguous(), cache),
                           full.narrow(1, 0, prompt)) <= 1e-5);
}

TEST(GPT, BadInputsAreShapeErrors) {
  GPT model(tiny_config());
  NoGradGuard no_grad;
  EXPECT_THROW(model(random_ids(1, 13, 13, 3)), ShapeError);  // past block_size 12
  EXPECT_THROW(model(zeros({2, 3})), ShapeError);             // float, not ids
  EXPECT_THROW(model(random_ids(1, 4, 13, 3).view({4})), ShapeError);
}

// The head is the token table: the table's gradient holds both uses. Checked in float64 against
// central differences of the loss on a few table entries (rows the batch uses and rows it does not,
// whose gradient comes from the head alone).
TEST(GPT, TiedHeadGradientMatchesFiniteDifferences) {
  GPT model(tiny_config());
  model.to(DType::Float64);
  const Tensor ids = random_ids(2, 6, 13, 4);
  const Tensor targets = random_ids(2, 6, 13, 5);
  auto loss_of = [&] { return nn::functional::cross_entropy(model(ids).view({12, 13}), targets.view({12})); };
  model.zero_grad();
  loss_of().backward();
  Tensor& table = model.transformer->wte->weight;
  const std::vector<double> analytic = table.grad().to_vector<double>();
  const double eps = 1e-6;
  double worst = 0.0;
  for (std::int64_t index : {0, 9, 17, 40, 63, 88, 101}) {
    NoGradGuard no_grad;
    double* value = table.data<double>() + index;
    const double saved = *value;
    *value = saved + eps;
    const double up = loss_of().item<double>();
    *value = saved - eps;
    const double down = loss_of().item<double>();
    *value = saved;
    const double numeric = (up - down) / (2 * eps);
    const double err = std::abs(numeric - analytic[static_cast<std::size_t>(index)]) /
                       std::max(1.0, std::abs(numeric));
    if (!(err <= worst)) worst = err;
  }
  EXPECT_TRUE(worst <= 1e-6) << worst;
}

TEST(GPT, WeightsFileRoundTripsWithNanoGPTNames) {
  const fs::path dir = fs::temp_directory_path() / ("sublet_test_gpt_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  GPT model(tiny_config());
  const fs::path file = dir / "gpt.safetensors";
  models::save_gpt_weights(file, model, "tiny");
  const io::SafetensorsFile raw = io::load_safetensors(file);
  EXPECT_EQ(raw.tensors.count("lm_head.weight"), 1u);
  EXPECT_EQ(raw.tensors.at("lm_head.weight").bytes, raw.tensors.at("transformer.wte.weight").bytes);
  EXPECT_EQ(raw.tensors.size(), model.state_dict().size() + 1);
  EXPECT_EQ(raw.metadata.at("n_layer"), "2");
  auto loaded = models::load_gpt_weights(file);
  EXPECT_EQ(loaded->config().n_embd, 8);
  NoGradGuard no_grad;
  const Tensor ids = random_ids(1, 7, 13, 6);
  EXPECT_TRUE(max_abs_diff(model(ids), (*loaded)(ids)) <= 0.0);

  // An untied head is refused; a file without the config is not a GPT weights file.
  std::map<std::string, io::TensorRecord> tensors = raw.tensors;
  tensors.at("lm_head.weight").bytes[0] ^= 0x40;
  io::save_safetensors(dir / "untied.safetensors", tensors, raw.metadata);
  EXPECT_THROW(models::load_gpt_weights(dir / "untied.safetensors"), IoError);
  io::save_safetensors(dir / "plain.safetensors", raw.tensors, {});
  EXPECT_THROW(models::load_gpt_weights(dir / "plain.safetensors"), IoError);
  std::map<std::string, std::string> wrong = raw.metadata;
  wrong["n_embd"] = "16";
  io::save_safetensors(dir / "wrong.safetensors", raw.tensors, wrong);
  EXPECT_THROW(models::load_gpt_weights(dir / "wrong.safetensors"), IoError);
  fs::remove_all(dir);
}

TEST(GPT, BlocksRecomputedInBackwardGiveTheSameGradients) {
  GPT plain(tiny_config()), recomputed(tiny_config());
  recomputed.set_recompute_blocks({{0, 2}});
  const Tensor ids = random_ids(2, 8, 13, 7);
  const Tensor targets = random_ids(2, 8, 13, 8);
  for (GPT* m : {&plain, &recomputed}) {
    nn::functional::cross_entropy((*m)(ids).view({16, 13}), targets.view({16})).backward();
  }
  const auto a = plain.named_parameters(), b = recomputed.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(max_abs_diff(a[i].second.grad(), b[i].second.grad()) <= 0.0) << a[i].first;
}

// Each block's MLP residual add runs inside the next norm (the next ln_1, or ln_f): on the CPU
// that is `+` then the norm, so logits and gradients are those of the closed blocks exactly, in
// forward, with recomputed blocks and with the KV cache.
TEST(GPT, OpenBlockBoundariesGiveTheClosedBlocksResults) {
  GPT model(tiny_config());
  const Tensor ids = random_ids(2, 9, 13, 3);
  auto run = [&](std::vector<Tensor>& grads) {
    model.zero_grad();
    Tensor logits = model(ids);
    (logits * logits).sum().backward();
    grads.clear();
    for (const Tensor& p : model.parameters()) grads.push_back(p.grad().clone());
    return logits.detach();
  };
  auto cached = [&]() {
    models::KVCache cache;
    model.forward_cached(ids.narrow(1, 0, 8).contiguous(), cache);
    return model.forward_cached(ids.narrow(1, 8, 1).contiguous(), cache);
  };
  std::vector<Tensor> open_grads, closed_grads;
  const Tensor open = run(open_grads);
  const Tensor open_cached = cached();
  Tensor closed, closed_cached;
  {
    ScopedTuning unfused([](TuningOptions& o) { o.fused_layer_norm = false; });
    closed = run(closed_grads);
    closed_cached = cached();
  }
  EXPECT_TRUE(max_abs_diff(open, closed) <= 0.0);
  EXPECT_TRUE(max_abs_diff(open_cached, closed_cached) <= 0.0);
  EXPECT_LT(max_abs_diff(open_cached, open.narrow(1, 8, 1)), 1e-5);
  ASSERT_EQ(open_grads.size(), closed_grads.size());
  for (std::size_t i = 0; i < open_grads.size(); ++i)
    EXPECT_TRUE(max_abs_diff(open_grads[i], closed_grads[i]) <= 0.0) << "parameter " << i;
}

// The blocks' and transformer.h's hooks fire once each way, in order, with the boundaries open.
TEST(GPT, BlockHooksFireWithOpenBoundaries) {
  GPT model(tiny_config());
  std::vector<std::string> events;
  std::vector<std::pair<std::string, nn::Module*>> watched{{"h", model.transformer->h.get()}};
  for (std::size_t i = 0; i < model.transformer->h->size(); ++i)
    watched.emplace_back("h." + std::to_string(i), (*model.transformer->h)[i].get());
  for (auto& entry : watched) {
    const std::string name = entry.first;
    entry.second->register_forward_pre_hook([&events, name](nn::Module&, const Tensor&) { events.push_back(name + " pre"); });
    entry.second->register_forward_hook(
        [&events, name](nn::Module&, const Tensor&, const Tensor&) { events.push_back(name + " post"); });
    entry.second->register_backward_hook(
        [&events, name](nn::Module&, const Tensor&, const Tensor&) { events.push_back(name + " backward"); });
  }
  model(random_ids(1, 5, 13, 4)).sum().backward();
  const std::vector<std::string> expected{"h pre",  "h.0 pre",  "h.0 post",     "h.1 pre",     "h.1 post",
                                          "h post", "h.1 backward", "h.0 backward", "h backward"};
  EXPECT_EQ(events, expected);
}

}  // namespace
}  // namespace sublet
