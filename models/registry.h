#pragma once
// Models by name, for the CLI, benchmarks and tests:
//   auto model = models::create_model("resnet18", {.num_classes = 1000, .seed = 7});
// Names: resnet20, resnet32, resnet56 (CIFAR-style, any input size and channel count) and
// resnet18, resnet34, resnet50 (torchvision's; small_input_stem swaps the 7x7/2 stem and
// max-pool for a 3x3/1 stem, for 32x32 inputs). small_input_stem does not change the CIFAR
// models, which have that stem already.
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
  std::uint64_t seed = 0;  // every parameter is drawn from a Generator with this seed
};

// ValueError listing the known names for an unknown one.
std::shared_ptr<nn::Module> create_model(const std::string& name, const ModelOptions& options = {});
std::vector<std::string> model_names();

}  // namespace sublet::models
