#include "models/gpt_export.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "core/errors.h"
#include "runtime/factories.h"
#include "runtime/io/safetensors.h"

namespace sublet::models {
namespace {

const char* const kSizes[] = {"n_layer", "n_head", "n_embd", "block_size", "vocab_size"};

std::int64_t* size_field(GPTConfig& config, const std::string& key) {
  if (key == "n_layer") return &config.n_layer;
  if (key == "n_head") return &config.n_head;
  if (key == "n_embd") return &config.n_embd;
  if (key == "block_size") return &config.block_size;
  return &config.vocab_size;
}

std::int64_t parse_size(const std::filesystem::path& path, const std::string& key, const std::string& text) {
  std::size_t used = 0;
  std::int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < 1) {
    throw IoError(fmt::format("{}: metadata '{}' must be a positive integer, found '{}'", path.string(), key, text));
  }
  return value;
}

GptWeightsInfo info_from_metadata(const std::filesystem::path& path, const std::map<std::string, std::string>& meta) {
  const auto format = meta.find("format");
  if (format == meta.end() || format->second != kGptWeightsFormat) {
    throw IoError(fmt::format("{}: not a sublet GPT weights file (expected metadata format = '{}', found {})",
                              path.string(), kGptWeightsFormat,
                              format == meta.end() ? "none" : "'" + format->second + "'"));
  }
  GptWeightsInfo info;
  for (const char* key : kSizes) {
    const auto it = meta.find(key);
    if (it == meta.end()) throw IoError(fmt::format("{}: metadata '{}' is missing", path.string(), key));
    *size_field(info.config, key) = parse_size(path, key, it->second);
  }
  const auto name = meta.find("model");
  info.name = name == meta.end() ? "gpt" : name->second;
  return info;
}

}  // namespace

nn::Module::NamedTensors nanogpt_state_dict(const GPT& model) {
  nn::Module::NamedTensors state = model.state_dict();
  state.emplace_back("lm_head.weight", model.transformer->wte->weight);
  return state;
}

void save_gpt_weights(const std::filesystem::path& path, const GPT& model, const std::string& name,
                      const std::map<std::string, std::string>& extra_metadata) {
  std::map<std::string, io::TensorRecord> records;
  for (const auto& [key, tensor] : nanogpt_state_dict(model)) {
    const std::vector<float> values = tensor.detach().to(DType::Float32).to_vector<float>();
    std::vector<std::int64_t> shape(tensor.sizes().begin(), tensor.sizes().end());
    records.emplace(key, io::make_f32_record(std::move(shape), values));
  }
  std::map<std::string, std::string> metadata = extra_metadata;
  metadata["format"] = kGptWeightsFormat;
  metadata["model"] = name;
  const GPTConfig& c = model.config();
  GPTConfig copy = c;
  for (const char* key : kSizes) metadata[key] = std::to_string(*size_field(copy, key));
  io::save_safetensors(path, records, metadata);
}

GptWeightsInfo read_gpt_weights_info(const std::filesystem::path& path) {
  return info_from_metadata(path, io::load_safetensors(path).metadata);
}

std::shared_ptr<GPT> load_gpt_weights(const std::filesystem::path& path) {
  const io::SafetensorsFile file = io::load_safetensors(path);
  const GptWeightsInfo info = info_from_metadata(path, file.metadata);
  auto model = std::make_shared<GPT>(info.config);
  nn::Module::NamedTensors state;
  for (const auto& [key, tensor] : model->state_dict()) {
    const auto it = file.tensors.find(key);
    if (it == file.tensors.end()) throw IoError(fmt::format("{}: tensor '{}' is missing", path.string(), key));
    const io::TensorRecord& record = it->second;
    const std::vector<std::int64_t> expected(tensor.sizes().begin(), tensor.sizes().end());
    if (record.shape != expected) {
      throw IoError(fmt::format("{}: tensor '{}' has shape [{}], the model's config needs [{}]", path.string(), key,
                                fmt::join(record.shape, ", "), fmt::join(expected, ", ")));
    }
    if (record.dtype != "F32") {
      throw IoError(fmt::format("{}: tensor '{}' is {}, expected F32", path.string(), key, record.dtype));
    }
    std::vector<float> values = io::record_as_f32(record);
    Tensor loaded = empty(tensor.sizes(), TensorOptions(DType::Float32));
    std::memcpy(loaded.data_ptr(), values.data(), values.size() * sizeof(float));
    state.emplace_back(key, loaded);
  }
  if (const auto head = file.tensors.find("lm_head.weight"); head != file.tensors.end()) {
    const auto table = file.tensors.find("transformer.wte.weight");
    if (head->second.shape != table->second.shape || head->second.bytes != table->second.bytes) {
      throw IoError(path.string() + ": lm_head.weight differs from transformer.wte.weight; this GPT ties them (the "
                    "head is the token embedding)");
    }
  }
  for (const auto& [key, record] : file.tensors) {
    if (key == "lm_head.weight") continue;
    bool known = false;
    for (const auto& [name, tensor] : state) known = known || name == key;
    if (!known) throw IoError(fmt::format("{}: unexpected tensor '{}' for {}", path.string(), key, info.name));
  }
  model->load_state_dict(state, /*strict=*/true);
  return model;
}

}  // namespace sublet::models
