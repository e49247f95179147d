#include "models/gpt_sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "core/errors.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"

namespace sublet::models {

std::int64_t sample_token(std::vector<float> logits, double temperature, std::int64_t top_k, double uniform) {
  if (logits.empty()) throw ValueError("sample_token: no logits");
  if (temperature == 0.0) {
    return std::max_element(logits.begin(), logits.end()) - logits.begin();
  }
  const auto size = static_cast<std::int64_t>(logits.size());
  if (top_k > 0 && top_k < size) {
    std::vector<float> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<float>());
    const float kth = sorted[static_cast<std::size_t>(top_k - 1)];
    for (float& v : logits)
      if (v < kth) v = -std::numeric_limits<float>::infinity();  // ties at the k-th are kept, as torch.topk's cut
  }
  const float top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> weights(logits.size());
  double total = 0.0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    weights[i] = std::exp((static_cast<double>(logits[i]) - top) / temperature);
    total += weights[i];
  }
  double target = uniform * total;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (target < weights[i]) return static_cast<std::int64_t>(i);
    target -= weights[i];
  }
  // Rounding left the draw past the end: the last token with any weight.
  for (std::size_t i = weights.size(); i-- > 0;)
    if (weights[i] > 0.0) return static_cast<std::int64_t>(i);
  return 0;
}

std::vector<std::int64_t> generate(GPT& model, const std::vector<std::int64_t>& prompt, const SamplingOptions& options,
                                   const std::function<void(std::int64_t)>& on_token) {
  const GPTConfig& config = model.config();
  if (prompt.empty()) throw ValueError("generate: the prompt is empty; give at least one token");
  for (std::int64_t id : prompt) {
    if (id < 0 || id >= config.vocab_size)
      throw ValueError(fmt::format("generate: prompt token {} is outside the vocabulary [0, {})", id, config.vocab_size));
  }
  if (options.max_new_tokens() < 0)
    throw ValueError(fmt::format("generate: --tokens must be >= 0, got {}", options.max_new_tokens()));
  if (!(options.temperature() >= 0.0) || std::isinf(options.temperature()))
    throw ValueError(fmt::format("generate: --temperature must be >= 0 and finite, got {}", options.temperature()));
  if (options.top_k() < 0) throw ValueError(fmt::format("generate: --top-k must be >= 0, got {}", options.top_k()));

  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const Device device = model.transformer->wte->weight.device();
  std::mt19937_64 engine(options.seed());
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  auto ids_tensor = [&](const std::int64_t* first, std::int64_t count) {
    Tensor ids = empty({1, count}, DType::Int64);
    std::copy(first, first + count, ids.data<std::int64_t>());
    return ids.to(device);
  };

  std::vector<std::int64_t> context = prompt;  // everything so far
  std::vector<std::int64_t> out;
  KVCache cache;
  Tensor logits;
  // The prompt's last block_size tokens fill the cache.
  auto refill = [&] {
    cache.clear();
    const auto count = std::min<std::int64_t>(static_cast<std::int64_t>(context.size()), config.block_size);
    logits = model.forward_cached(ids_tensor(context.data() + context.size() - count, count), cache);
  };
  refill();
  for (std::int64_t i = 0; i < options.max_new_tokens(); ++i) {
    const Tensor last = logits.select(1, logits.size(1) - 1).select(0, 0);
    const std::int64_t token =
        sample_token(last.to(DType::Float32).to_vector<float>(), options.temperature(), options.top_k(), uniform(engine));
    out.push_back(token);
    context.push_back(token);
    if (on_token) on_token(token);
    if (i + 1 == options.max_new_tokens()) break;
    if (cache.length() < config.block_size) {
      logits = model.forward_cached(ids_tensor(&token, 1), cache);
    } else {
      refill();  // the window slides: the last block_size tokens again, from position 0
    }
  }
  model.train(was_training);
  return out;
}

}  // namespace sublet::models
