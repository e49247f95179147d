#pragma once
// GPT weights as one safetensors file that PyTorch loads into nanoGPT's model as it is:
//
//   from safetensors.torch import load_file
//   model.load_state_dict(load_file("gpt.safetensors"), strict=True)
//
// Tensors: every entry of nanoGPT's state_dict for its flash-attention model (no attn.bias mask
// buffer), float32, under its names, lm_head.weight included. The head is tied to
// transformer.wte.weight, and a safetensors file cannot let two names share bytes (its reader
// refuses overlapping offsets), so the table is stored twice; load_state_dict copies both into
// the one tied tensor. (safetensors.torch.save_file refuses shared tensors; save_model would drop
// one name, and then only load_model, not load_state_dict(strict=True), would take the file.)
// Metadata: format "sublet-gpt", the model's name and its GPTConfig sizes as strings, so the
// file alone rebuilds the model.
#include <filesystem>
#include <map>
#include <string>

#include "models/gpt.h"

namespace sublet::models {

inline constexpr const char* kGptWeightsFormat = "sublet-gpt";

// Writes atomically. `name` is the registry name ("gpt-mini") or any label; `extra_metadata` is
// added as it is (string values).
void save_gpt_weights(const std::filesystem::path& path, const GPT& model, const std::string& name,
                      const std::map<std::string, std::string>& extra_metadata = {});

// The config a weights file describes and the file's name for it (metadata "model").
struct GptWeightsInfo {
  GPTConfig config;
  std::string name;
};
GptWeightsInfo read_gpt_weights_info(const std::filesystem::path& path);

// A model built from the file's config with its weights, on the CPU. lm_head.weight, when present,
// must equal transformer.wte.weight (a file whose head was untied is refused: this model ties
// them). IoError naming the file for a missing entry, a shape or dtype that does not fit, or a file
// that is not a sublet GPT weights file.
std::shared_ptr<GPT> load_gpt_weights(const std::filesystem::path& path);

// The model's tensors under nanoGPT's names (lm_head.weight included, the same tensor as
// transformer.wte.weight): what save_gpt_weights writes.
nn::Module::NamedTensors nanogpt_state_dict(const GPT& model);

}  // namespace sublet::models
