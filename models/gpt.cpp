#include "models/gpt.h"

#include <array>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "core/errors.h"
#include "core/tuning.h"
#include "runtime/autocast.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"

namespace sublet::models {
namespace F = nn::functional;

namespace {

constexpr double kInitStd = 0.02;

struct NamedConfig {
  const char* name;
  std::int64_t n_layer, n_head, n_embd, block_size;
};

constexpr NamedConfig kConfigs[] = {
    {"gpt-nano", 3, 3, 48, 64},
    {"gpt-mini", 6, 6, 384, 256},
    {"gpt2-small", 12, 12, 768, 1024},
};

std::shared_ptr<nn::Linear> linear(std::int64_t in, std::int64_t out, double stddev, Generator& generator) {
  auto layer = std::make_shared<nn::Linear>(nn::LinearOptions(in, out), generator);
  NoGradGuard no_grad;
  layer->weight.normal_(0.0, stddev, generator);
  layer->bias.zero_();
  return layer;
}

std::shared_ptr<nn::Embedding> embedding(std::int64_t rows, std::int64_t dim, Generator& generator) {
  auto table = std::make_shared<nn::Embedding>(nn::EmbeddingOptions(rows, dim), generator);
  NoGradGuard no_grad;
  table->weight.normal_(0.0, kInitStd, generator);
  return table;
}

std::shared_ptr<nn::Dropout> dropout_or_null(double p) {
  return p > 0.0 ? std::make_shared<nn::Dropout>(nn::DropoutOptions(p)) : nullptr;
}

// nanoGPT's special scaled init of the residual projections (GPT-2 paper, section 2.3).
double residual_projection_std(const GPTConfig& config) {
  return kInitStd / std::sqrt(2.0 * static_cast<double>(config.n_layer));
}

}  // namespace

GPTConfig gpt_config(const std::string& name, std::int64_t vocab_size) {
  if (vocab_size < 1) throw ValueError(fmt::format("{}: vocab_size must be >= 1, got {}", name, vocab_size));
  for (const NamedConfig& c : kConfigs) {
    if (name != c.name) continue;
    GPTConfig config;
    config.n_layer = c.n_layer;
    config.n_head = c.n_head;
    config.n_embd = c.n_embd;
    config.block_size = c.block_size;
    config.vocab_size = vocab_size;
    return config;
  }
  std::string list;
  for (const std::string& known : gpt_model_names()) list += (list.empty() ? "" : ", ") + known;
  throw ValueError("unknown GPT model '" + name + "': known GPT models are " + list);
}

std::vector<std::string> gpt_model_names() {
  std::vector<std::string> names;
  for (const NamedConfig& c : kConfigs) names.emplace_back(c.name);
  return names;
}

bool is_gpt_model(const std::string& name) {
  for (const NamedConfig& c : kConfigs)
    if (name == c.name) return true;
  return false;
}

std::int64_t KVCache::capacity() const { return keys.empty() ? 0 : keys.front().size(2); }

CausalSelfAttention::CausalSelfAttention(const GPTConfig& config, Generator& generator)
    : Module("CausalSelfAttention"), n_head_(config.n_head), n_embd_(config.n_embd), block_size_(config.block_size) {
  if (config.n_embd % config.n_head != 0) {
    throw ValueError(fmt::format("GPT: n_embd {} is not a multiple of n_head {}", config.n_embd, config.n_head));
  }
  c_attn = register_module("c_attn", linear(n_embd_, 3 * n_embd_, kInitStd, generator));
  c_proj = register_module("c_proj", linear(n_embd_, n_embd_, residual_projection_std(config), generator));
  if (auto drop = dropout_or_null(config.dropout)) resid_dropout = register_module("resid_dropout", drop);
}

Tensor CausalSelfAttention::project_output(const Tensor& attended, std::int64_t batch, std::int64_t tokens) {
  // attended [B, H, T, D] -> [B, T, H, D] -> [B, T, C]
  Tensor y = attended.transpose(1, 2).reshape({batch, tokens, n_embd_});
  y = (*c_proj)(y);
  return resid_dropout ? (*resid_dropout)(y) : y;
}

namespace {

// q, k, v of one [B, T, 3C] projection as [B, H, T, D] views (no copy: the attention op reads
// strided operands whose last dimension is dense).
std::array<Tensor, 3> split_heads(const Tensor& qkv, std::int64_t n_head, std::int64_t n_embd) {
  const std::int64_t batch = qkv.size(0), tokens = qkv.size(1), head_dim = n_embd / n_head;
  std::array<Tensor, 3> out;
  for (std::int64_t i = 0; i < 3; ++i) {
    out[static_cast<std::size_t>(i)] =
        qkv.narrow(2, i * n_embd, n_embd).view({batch, tokens, n_head, head_dim}).transpose(1, 2);
  }
  return out;
}

}  // namespace

Tensor CausalSelfAttention::forward(const Tensor& x) {
  // q, k and v read in place from the projection; backward writes one gradient for all three.
  const Tensor attended = F::packed_self_attention((*c_attn)(x), n_head_, /*is_causal=*/true);
  return project_output(attended, x.size(0), x.size(1));
}

Tensor CausalSelfAttention::forward_cached(const Tensor& x, KVCache& cache, std::size_t layer) {
  const std::int64_t batch = x.size(0), tokens = x.size(1), start = cache.length();
  if (start > 0 && tokens != 1) {
    throw ValueError(fmt::format("GPT::forward_cached: after the prompt, one token at a time (got {} tokens with {} "
                                 "cached)",
                                 tokens, start));
  }
  const auto [q, k, v] = split_heads((*c_attn)(x), n_head_, n_embd_);
  Tensor& key_cache = cache.keys.at(layer);
  Tensor& value_cache = cache.values.at(layer);
  const bool fits = key_cache.defined() && key_cache.size(0) == batch && key_cache.dtype() == k.dtype() &&
                    key_cache.device() == k.device();
  if (!fits && start == 0) {
    // In the projection's dtype (16-bit under autocast).
    const TensorOptions options = TensorOptions(k.dtype()).device(k.device());
    key_cache = empty({batch, n_head_, block_size_, n_embd_ / n_head_}, options);
    value_cache = empty({batch, n_head_, block_size_, n_embd_ / n_head_}, options);
  } else if (!fits) {
    throw ValueError("GPT::forward_cached: the cache was made for another batch, dtype or device; clear it");
  }
  key_cache.narrow(2, start, tokens).copy_(k);
  value_cache.narrow(2, start, tokens).copy_(v);
  const Tensor keys = key_cache.narrow(2, 0, start + tokens);
  const Tensor values = value_cache.narrow(2, 0, start + tokens);
  // A prompt on an empty cache is causal over itself; one new token attends to everything cached
  // (the op's causal mask is aligned at the upper left, which would hide the cache from it).
  const Tensor attended = F::scaled_dot_product_attention(q, keys, values, /*is_causal=*/start == 0);
  return project_output(attended, batch, tokens);
}

MLP::MLP(const GPTConfig& config, Generator& generator) : Module("MLP") {
  c_fc = register_module("c_fc", linear(config.n_embd, 4 * config.n_embd, kInitStd, generator));
  gelu = register_module("gelu", std::make_shared<nn::GELU>(nn::GELUOptions().approximate(F::GeluApproximate::Tanh)));
  c_proj = register_module("c_proj", linear(4 * config.n_embd, config.n_embd, residual_projection_std(config), generator));
  if (auto drop = dropout_or_null(config.dropout)) dropout = register_module("dropout", drop);
}

Tensor MLP::forward(const Tensor& x) {
  // On CUDA in 16-bit the three run as one op with the GELU in the GEMMs' epilogues (their own
  // module hooks then do not fire; the MLP's do); elsewhere module by module.
  Tensor y = F::linear_gelu_linear_fused(x, c_fc->weight, c_fc->bias, c_proj->weight, c_proj->bias);
  if (!y.defined()) y = (*c_proj)((*gelu)((*c_fc)(x)));
  return dropout ? (*dropout)(y) : y;
}

Block::Block(const GPTConfig& config, Generator& generator) : Module("Block") {
  ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(nn::LayerNormOptions({config.n_embd})));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(config, generator));
  ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(nn::LayerNormOptions({config.n_embd})));
  mlp = register_module("mlp", std::make_shared<MLP>(config, generator));
}

namespace {

// The dtype the linear after a block's layer norm computes in: under autocast it would cast the
// norm's float32 output to the 16-bit type, so the norm writes that type itself (the same values;
// on CUDA no cast kernel either way). float64 is never lowered, as in PyTorch.
std::optional<DType> lowered_dtype(const Tensor& x) {
  if (amp::autocast_is_enabled() && x.dtype() != DType::Float64) return amp::autocast_dtype();
  return std::nullopt;
}

DType linear_input_dtype(const Tensor& x) { return lowered_dtype(x).value_or(x.dtype()); }

// Fused norms and open block boundaries on CUDA only: the CPU has no fused kernel for them, and
// its blocks keep the plain ops' order (the simulated allocator's traces are the unfused model's).
bool fused_norms(const Tensor& x) { return tuning().fused_layer_norm && x.device().is_cuda(); }

}  // namespace

// With fused layer norms each residual add runs in the kernel of the norm after it: the attention's
// with ln_2, the MLP's with the next block's ln_1 (or ln_f) when the stream is left open.
Tensor Block::forward(const Tensor& x) {
  if (!fused_norms(x)) {  // switched off for comparisons: the unfused ops
    const Tensor h = x + (*attn)((*ln_1)(x));
    return h + (*mlp)((*ln_2)(h));
  }
  return run_open({x, Tensor()}).sum();
}

Tensor Block::forward_cached(const Tensor& x, KVCache& cache, std::size_t layer) {
  if (!fused_norms(x)) {
    const Tensor h = x + attn->forward_cached((*ln_1)(x), cache, layer);
    return h + (*mlp)((*ln_2)(h));
  }
  return forward_cached_open({x, Tensor()}, cache, layer).sum();
}

ResidualStream Block::forward_open(const ResidualStream& in) {
  if (!fused_norms(in.residual)) return {(*this)(in.sum()), Tensor()};
  ResidualStream out;
  // The hooks see the residual; the pending branch joins it inside (as forward_add's do).
  const Tensor branch = call_with_hooks(in.residual, [&](const Tensor& residual) {
    out = run_open({residual, in.branch});
    return out.branch;
  });
  return {out.residual, branch};
}

ResidualStream Block::forward_cached_open(const ResidualStream& in, KVCache& cache, std::size_t layer) {
  if (!fused_norms(in.residual)) return {forward_cached(in.sum(), cache, layer), Tensor()};
  const auto [x, normed] = normed_input(in);
  return attention_added(x, attn->forward_cached(normed, cache, layer));
}

ResidualStream Block::run_open(const ResidualStream& in) {
  const auto [x, normed] = normed_input(in);
  return attention_added(x, (*attn)(normed));
}

std::pair<Tensor, Tensor> Block::normed_input(const ResidualStream& in) {
  if (!in.branch.defined()) return {in.residual, ln_1->forward_as(in.residual, linear_input_dtype(in.residual))};
  auto [x, normed] = ln_1->forward_add(in.residual, in.branch, lowered_dtype(in.residual));
  return {std::move(x), std::move(normed)};
}

ResidualStream Block::attention_added(const Tensor& x, const Tensor& attended) {
  auto [h, normed] = ln_2->forward_add(x, attended, lowered_dtype(x));
  return {std::move(h), (*mlp)(normed)};
}

ResidualStream BlockStack::forward_open(const Tensor& x) {
  // Recomputed blocks are checkpointed as one tensor in, one out: with any recompute run the
  // blocks run as modules, each boundary closed.
  if (!fused_norms(x) || size() == 0 || !recompute_runs().empty()) return {(*this)(x), Tensor()};
  ResidualStream stream;
  const Tensor branch = call_with_hooks(x, [&](const Tensor& input) {
    stream = {input, Tensor()};
    for (std::size_t i = 0; i < size(); ++i) stream = static_cast<Block&>(*(*this)[i]).forward_open(stream);
    return stream.branch;
  });
  return {stream.residual, branch};
}

GPTBody::GPTBody(const GPTConfig& config, Generator& generator) : Module("GPTBody") {
  wte = register_module("wte", embedding(config.vocab_size, config.n_embd, generator));
  wpe = register_module("wpe", embedding(config.block_size, config.n_embd, generator));
  if (auto d = dropout_or_null(config.dropout)) drop = register_module("drop", d);
  h = register_module("h", std::make_shared<BlockStack>());
  for (std::int64_t i = 0; i < config.n_layer; ++i) h->push_back(std::make_shared<Block>(config, generator));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(nn::LayerNormOptions({config.n_embd})));
}

GPT::GPT(const GPTConfig& config) : Module("GPT"), config_(config) {
  if (config.n_layer < 1 || config.n_head < 1 || config.n_embd < 1 || config.block_size < 1 || config.vocab_size < 1) {
    throw ValueError(fmt::format("GPT: every size must be >= 1 (n_layer {}, n_head {}, n_embd {}, block_size {}, "
                                 "vocab_size {})",
                                 config.n_layer, config.n_head, config.n_embd, config.block_size, config.vocab_size));
  }
  if (!(config.dropout >= 0.0 && config.dropout < 1.0))
    throw ValueError(fmt::format("GPT: dropout must be in [0, 1), got {}", config.dropout));
  Generator generator(config.seed);
  transformer = register_module("transformer", std::make_shared<GPTBody>(config, generator));
}

Tensor GPT::embed(const Tensor& ids, std::int64_t first_position) {
  if (ids.dim() != 2 || ids.dtype() != DType::Int64) {
    throw ShapeError(fmt::format("GPT: expected token ids of int64 [batch, tokens], got {}", ids.to_string()));
  }
  const std::int64_t tokens = ids.size(1);
  if (tokens < 1 || first_position + tokens > config_.block_size) {
    throw ShapeError(fmt::format("GPT: {} tokens from position {} do not fit the context of {} (block_size)", tokens,
                                 first_position, config_.block_size));
  }
  // The position embeddings of first_position.. are rows of wpe's table in order: a slice of it
  // (broadcast over the batch), with no position ids to build on the host and upload each step,
  // which a captured CUDA graph could not do.
  const Tensor positions = transformer->wpe->weight.narrow(0, first_position, tokens);
  Tensor x = (*transformer->wte)(ids) + positions;
  return transformer->drop ? (*transformer->drop)(x) : x;
}

// ln_f writes the dtype the head computes in, adding the last block's pending branch itself.
Tensor GPT::head(const ResidualStream& x) {
  nn::LayerNorm& ln_f = *transformer->ln_f;
  Tensor normed;
  if (!fused_norms(x.residual)) normed = ln_f(x.sum());
  else if (x.branch.defined()) normed = ln_f.forward_add(x.residual, x.branch, lowered_dtype(x.residual)).normalized;
  else normed = ln_f.forward_as(x.residual, linear_input_dtype(x.residual));
  return F::linear(normed, transformer->wte->weight);  // tied: lm_head.weight is wte.weight
}

Tensor GPT::forward(const Tensor& ids) { return head(transformer->h->forward_open(embed(ids, 0))); }

Tensor GPT::forward_cached(const Tensor& ids, KVCache& cache) {
  NoGradGuard no_grad;
  if (ids.dim() != 2) {
    throw ShapeError(fmt::format("GPT: expected token ids of int64 [batch, tokens], got {}", ids.to_string()));
  }
  if (cache.length() + ids.size(1) > config_.block_size) {
    throw ValueError(fmt::format("GPT::forward_cached: {} cached + {} new tokens pass the context of {}; clear the "
                                 "cache and feed the last tokens again",
                                 cache.length(), ids.size(1), config_.block_size));
  }
  const Tensor x = embed(ids, cache.length());
  const std::size_t layers = transformer->h->size();
  if (cache.keys.size() != layers) {
    cache.keys.assign(layers, Tensor());
    cache.values.assign(layers, Tensor());
  }
  ResidualStream stream{x, Tensor()};
  for (std::size_t i = 0; i < layers; ++i) {
    stream = static_cast<Block&>(*(*transformer->h)[i]).forward_cached_open(stream, cache, i);
  }
  cache.length_ += ids.size(1);
  return head(stream);
}

void GPT::set_recompute_blocks(const std::vector<nn::Sequential::Run>& runs) { transformer->h->set_recompute_runs(runs); }

std::vector<Tensor> GPT::decay_parameters() const {
  std::vector<Tensor> out;
  for (const Tensor& p : parameters())
    if (p.dim() >= 2) out.push_back(p);
  return out;
}

std::vector<Tensor> GPT::no_decay_parameters() const {
  std::vector<Tensor> out;
  for (const Tensor& p : parameters())
    if (p.dim() < 2) out.push_back(p);
  return out;
}

std::int64_t GPT::num_parameters(bool with_position_embeddings) const {
  std::int64_t total = 0;
  for (const Tensor& p : parameters()) total += p.numel();
  if (!with_position_embeddings) total -= transformer->wpe->weight.numel();
  return total;
}

}  // namespace sublet::models
