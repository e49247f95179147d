#pragma once
// Sampling continuations from a GPT, as nanoGPT's generate(): the last position's logits divided
// by the temperature, optionally cut to the top k, softmax, one draw. The prompt runs through the
// model once and every new token after it alone (a KV cache, GPT::forward_cached). When the
// context is full (block_size tokens), the oldest token is dropped as nanoGPT crops the context:
// each further step then runs the last block_size tokens through the model again (the positions
// of the cached keys would otherwise shift).
#include <cstdint>
#include <functional>
#include <vector>

#include "models/gpt.h"

namespace sublet::models {

class SamplingOptions {
 public:
  SamplingOptions& max_new_tokens(std::int64_t value) { max_new_tokens_ = value; return *this; }
  // > 0; 0 samples greedily (the most likely token every time).
  SamplingOptions& temperature(double value) { temperature_ = value; return *this; }
  // Keep the k most likely tokens; 0 keeps all.
  SamplingOptions& top_k(std::int64_t value) { top_k_ = value; return *this; }
  SamplingOptions& seed(std::uint64_t value) { seed_ = value; return *this; }
  std::int64_t max_new_tokens() const { return max_new_tokens_; }
  double temperature() const { return temperature_; }
  std::int64_t top_k() const { return top_k_; }
  std::uint64_t seed() const { return seed_; }

 private:
  std::int64_t max_new_tokens_ = 200;
  double temperature_ = 1.0;
  std::int64_t top_k_ = 0;
  std::uint64_t seed_ = 0;
};

// The token to emit given the next-token logits (float32 values, one per vocabulary entry) and a
// uniform draw in [0, 1): exposed for tests.
std::int64_t sample_token(std::vector<float> logits, double temperature, std::int64_t top_k, double uniform);

// The new tokens after `prompt` (ids in [0, vocab_size), at least one), generated on the model's
// device in eval mode. `on_token`, when set, sees each token as it is drawn (streaming output).
// ValueError for an empty prompt, an id outside the vocabulary, a negative count or temperature,
// or a negative top_k.
std::vector<std::int64_t> generate(GPT& model, const std::vector<std::int64_t>& prompt, const SamplingOptions& options,
                                   const std::function<void(std::int64_t)>& on_token = {});

}  // namespace sublet::models
