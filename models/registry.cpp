#include "models/registry.h"

#include <functional>
#include <utility>

#include "core/errors.h"
#include "models/gpt.h"
#include "models/resnet.h"

namespace sublet::models {

namespace {

using ConfigMaker = std::function<ResNetConfig(const ModelOptions&)>;

// Listed in the order model_names() reports them.
const std::vector<std::pair<std::string, ConfigMaker>>& makers() {
  static const std::vector<std::pair<std::string, ConfigMaker>> table = {
      {"resnet20", [](const ModelOptions& o) { return cifar_resnet_config(20, o.in_channels, o.num_classes); }},
      {"resnet32", [](const ModelOptions& o) { return cifar_resnet_config(32, o.in_channels, o.num_classes); }},
      {"resnet56", [](const ModelOptions& o) { return cifar_resnet_config(56, o.in_channels, o.num_classes); }},
      {"resnet18", [](const ModelOptions& o) { return resnet18_config(o.in_channels, o.num_classes, o.small_input_stem); }},
      {"resnet34", [](const ModelOptions& o) { return resnet34_config(o.in_channels, o.num_classes, o.small_input_stem); }},
      {"resnet50", [](const ModelOptions& o) { return resnet50_config(o.in_channels, o.num_classes, o.small_input_stem); }},
  };
  return table;
}

}  // namespace

std::shared_ptr<nn::Module> create_model(const std::string& name, const ModelOptions& options) {
  if (is_gpt_model(name)) {
    GPTConfig config = gpt_config(name, options.vocab_size);
    config.seed = options.seed;
    if (options.block_size > 0) config.block_size = options.block_size;
    return std::make_shared<GPT>(config);
  }
  for (const auto& [known, make] : makers()) {
    if (known != name) continue;
    ResNetConfig config = make(options);
    config.seed = options.seed;
    return std::make_shared<ResNet>(config);
  }
  std::string list;
  for (const auto& known : model_names()) list += (list.empty() ? "" : ", ") + known;
  throw ValueError("unknown model '" + name + "': known models are " + list);
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& [name, make] : makers()) names.push_back(name);
  for (const std::string& name : gpt_model_names()) names.push_back(name);
  return names;
}

bool is_language_model(const std::string& name) { return is_gpt_model(name); }

}  // namespace sublet::models
