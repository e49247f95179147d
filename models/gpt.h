#pragma once
// GPT-2's decoder-only transformer as nanoGPT writes it (model.py): learned position embeddings,
// pre-norm blocks (x + attn(ln_1(x)), then x + mlp(ln_2(x))), biases on, tanh GELU, a final layer
// norm, and an output head tied to the token embedding. Parameter names are nanoGPT's state_dict
// names (transformer.wte.weight, transformer.h.0.attn.c_attn.weight, ...), so a checkpoint loads
// into nanoGPT's model (models/gpt_export.h writes the tied head's name too).
//
//   auto model = std::make_shared<models::GPT>(models::gpt_config("gpt-mini", /*vocab_size=*/256));
//   Tensor logits = (*model)(ids);  // ids int64 [B, T] (T <= block_size) -> logits [B, T, vocab]
//
// Initialisation is nanoGPT's: every Linear and Embedding weight normal(0, 0.02), biases zero,
// layer norms one and zero, and each residual projection (attn.c_proj, mlp.c_proj) normal(0,
// 0.02 / sqrt(2 * n_layer)); all drawn from one Generator seeded by GPTConfig::seed.
//
// The head shares the token embedding's tensor (weight tying), so it is one parameter: it appears
// once in parameters() and state_dict() (as transformer.wte.weight), and an optimizer updates it
// once with the sum of both uses' gradients, as PyTorch's deduplicated model.parameters() does.
//
// Dropout (GPTConfig::dropout, 0 by default as nanoGPT's fine-tuning and this project's runs)
// applies after the embeddings, after each residual projection and inside the MLP; the attention
// probabilities are not dropped (the attention op has no dropout).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/generator.h"
#include "runtime/nn/activation.h"
#include "runtime/nn/dropout.h"
#include "runtime/nn/embedding.h"
#include "runtime/nn/layer_norm.h"
#include "runtime/nn/linear.h"

namespace sublet::models {

struct GPTConfig {
  std::int64_t n_layer = 12;
  std::int64_t n_head = 12;
  std::int64_t n_embd = 768;
  std::int64_t block_size = 1024;  // the context: positions 0..block_size-1 have embeddings
  std::int64_t vocab_size = 50304;
  double dropout = 0.0;
  std::uint64_t seed = 0;
};

// gpt-nano (3 layers, 3 heads, width 48, context 64), gpt-mini (6, 6, 384, 256) and gpt2-small
// (12, 12, 768, 1024: GPT-2's 124M at vocabulary 50,304). ValueError listing them otherwise, or
// for a vocab_size < 1.
GPTConfig gpt_config(const std::string& name, std::int64_t vocab_size);
std::vector<std::string> gpt_model_names();
bool is_gpt_model(const std::string& name);

// The keys and values of the tokens seen so far, one buffer per layer of [B, n_head, block_size,
// head_dim]: generation feeds one new token at a time instead of the whole context again.
class KVCache {
 public:
  KVCache() = default;
  std::int64_t length() const { return length_; }  // tokens cached
  std::int64_t capacity() const;                  // block_size, once allocated; 0 before
  void clear() { length_ = 0; }  // keeps the buffers for the next prompt of the same batch size

 private:
  friend class GPT;
  friend class CausalSelfAttention;
  std::vector<Tensor> keys, values;
  std::int64_t length_ = 0;
};

class CausalSelfAttention : public nn::Module {
 public:
  CausalSelfAttention(const GPTConfig& config, Generator& generator);
  // x [B, T, C] -> [B, T, C], causal.
  Tensor forward(const Tensor& x) override;
  // The same for the tokens after those in `cache` (layer `layer`), appending their keys and values.
  // Either the cache is empty (a prompt: causal over its T tokens) or T is 1 (the next token sees
  // every cached one).
  Tensor forward_cached(const Tensor& x, KVCache& cache, std::size_t layer);

  std::shared_ptr<nn::Linear> c_attn;  // [3C, C]: query, key, value
  std::shared_ptr<nn::Linear> c_proj;  // [C, C]
  std::shared_ptr<nn::Dropout> resid_dropout;  // null without dropout

 private:
  Tensor project_output(const Tensor& attended, std::int64_t batch, std::int64_t tokens);
  std::int64_t n_head_, n_embd_, block_size_;
};

class MLP : public nn::Module {
 public:
  MLP(const GPTConfig& config, Generator& generator);
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<nn::Linear> c_fc;    // [4C, C]
  std::shared_ptr<nn::GELU> gelu;      // tanh approximation
  std::shared_ptr<nn::Linear> c_proj;  // [C, 4C]
  std::shared_ptr<nn::Dropout> dropout;  // null without dropout
};

// The residual stream between blocks as residual + branch with the add still to do, so that the
// next layer norm does it in its own kernel (functional::add_layer_norm); branch undefined when
// nothing is pending.
struct ResidualStream {
  Tensor residual;
  Tensor branch;
  Tensor sum() const { return branch.defined() ? residual + branch : residual; }
};

class Block : public nn::Module {
 public:
  Block(const GPTConfig& config, Generator& generator);
  Tensor forward(const Tensor& x) override;
  Tensor forward_cached(const Tensor& x, KVCache& cache, std::size_t layer);
  // The same with the block boundaries open: the input's pending add runs fused with ln_1, and the
  // MLP's residual add is left to the next norm ({h, mlp(ln_2(h))}: the sum is forward's output).
  // The hooks operator() runs fire around forward_open with the input's residual as their input
  // and the MLP's branch as their output. With fused layer norms off, forward's output, closed.
  ResidualStream forward_open(const ResidualStream& in);
  ResidualStream forward_cached_open(const ResidualStream& in, KVCache& cache, std::size_t layer);

  std::shared_ptr<nn::LayerNorm> ln_1;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<nn::LayerNorm> ln_2;
  std::shared_ptr<MLP> mlp;

 private:
  ResidualStream run_open(const ResidualStream& in);
  std::pair<Tensor, Tensor> normed_input(const ResidualStream& in);  // {x, ln_1(x)}
  ResidualStream attention_added(const Tensor& x, const Tensor& attended);  // {h, mlp(ln_2(h))}
};

// transformer.h: the blocks as an nn::Sequential (its names, hooks and recompute runs), with the
// block boundaries open where no block is recomputed.
class BlockStack : public nn::Sequential {
 public:
  // The blocks over x, each boundary's residual add left to the next norm (Block::forward_open);
  // the stream's sum is forward(x). The hooks fire with x as the input and the last block's MLP
  // branch as the output. With a recompute run (or fused layer norms off): forward(x), closed.
  ResidualStream forward_open(const Tensor& x);
};

// nanoGPT's `transformer` ModuleDict: wte, wpe, drop, h, ln_f.
class GPTBody : public nn::Module {
 public:
  GPTBody(const GPTConfig& config, Generator& generator);

  std::shared_ptr<nn::Embedding> wte;  // [vocab_size, C], also the output head
  std::shared_ptr<nn::Embedding> wpe;  // [block_size, C]
  std::shared_ptr<nn::Dropout> drop;   // null without dropout
  std::shared_ptr<BlockStack> h;       // the blocks "0", "1", ...: recompute runs apply here
  std::shared_ptr<nn::LayerNorm> ln_f;
};

class GPT : public nn::Module {
 public:
  explicit GPT(const GPTConfig& config);
  // ids int64 [B, T] with 1 <= T <= block_size -> logits [B, T, vocab_size]. ShapeError for
  // another rank, dtype or a T past the context.
  Tensor forward(const Tensor& ids) override;
  // Logits of the new tokens `ids` [B, T] following the cached ones, caching their keys and
  // values (see CausalSelfAttention::forward_cached for which T are allowed). ValueError when
  // the cache would pass block_size (clear it and feed the last tokens again). Without autograd.
  Tensor forward_cached(const Tensor& ids, KVCache& cache);

  // Recompute the blocks in backward (nn::checkpoint): runs [begin, end) of transformer.h.
  void set_recompute_blocks(const std::vector<nn::Sequential::Run>& runs);
  // Parameters for AdamW as nanoGPT groups them: 2-D tensors (matmul weights, embeddings) decay,
  // the rest (biases, layer norms) do not. Together: parameters(), each once.
  std::vector<Tensor> decay_parameters() const;
  std::vector<Tensor> no_decay_parameters() const;
  // Distinct parameter elements (the tied head counted once); with_position_embeddings false is
  // the N of nanoGPT's MFU estimate.
  std::int64_t num_parameters(bool with_position_embeddings = true) const;
  const GPTConfig& config() const { return config_; }

  std::shared_ptr<GPTBody> transformer;

 private:
  Tensor embed(const Tensor& ids, std::int64_t first_position);
  Tensor head(const ResidualStream& x);  // ln_f (fused with the pending add) and the tied head
  GPTConfig config_;
};

}  // namespace sublet::models
