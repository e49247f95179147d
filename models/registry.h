#pragma once
// Models by name, for the CLI, benchmarks and tests:
//   auto model = models::create_model("resnet18", {.num_classes = 1000, .seed = 7});
// Names: resnet20, resnet32, resnet56 (CIFAR-style, any input size and channel count) and
// resnet18, resnet34, resnet50 (torchvision's; small_input_stem swaps the 7x7/2 stem and
// max-pool for a 3x3/1 stem, for 32x32 inputs). small_input_stem does not change the CIFAR
// models, which have that stem already.
//
// GPT models (models/gpt.h): gpt-nano, gpt-mini, gpt2-small, with the vocabulary of the data
// (vocab_size: 256 for byte-level text, 50,304 for GPT-2 token files); they take int64 token ids
// [B, T] and return logits [B, T, vocab_size]. in_channels, num_classes and small_input_stem do
// not apply to them.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/nn/module.h"

namespace sublet::models {

struct ModelOptions {
  std::int64_t in_channels = 3;
  std::int64_t num_classes = 10;
  bool small_input_stem = false;
  std::int64_t vocab_size = 256;  // GPT models only
  std::uint64_t seed = 0;  // every parameter is drawn from a Generator with this seed
  std::int64_t block_size = 0;  // GPT models only: the context (positions with embeddings); 0: the model's own
};

// ValueError listing the known names for an unknown one.
std::shared_ptr<nn::Module> create_model(const std::string& name, const ModelOptions& options = {});
std::vector<std::string> model_names();
// A GPT (token ids in, next-token logits out) rather than an image classifier.
bool is_language_model(const std::string& name);

}  // namespace sublet::models
