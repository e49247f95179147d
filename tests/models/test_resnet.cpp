// The ResNet family (models/resnet.h): parameter counts against torchvision's published numbers,
// state-dict names against the keys torchvision 0.14 writes (tests/models/data, produced by
// `torchvision.models.resnetXX().state_dict().keys()`), output shapes for several input sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "core/errors.h"
#include "models/registry.h"
#include "models/resnet.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"

namespace sublet {
namespace {

std::int64_t parameter_count(const nn::Module& model) {
  std::int64_t total = 0;
  for (const Tensor& p : model.parameters()) total += p.numel();
  return total;
}

std::vector<std::string> state_names(const nn::Module& model) {
  std::vector<std::string> names;
  for (const auto& [name, t] : model.named_parameters()) names.push_back(name);
  for (const auto& [name, t] : model.named_buffers()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> torchvision_keys(const std::string& model) {
  const std::string path = std::string(SUBLET_MODELS_TEST_DATA) + "/torchvision_" + model + "_keys.txt";
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::vector<std::string> keys;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) keys.push_back(line);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

models::ModelOptions imagenet(std::int64_t classes = 1000) { return {.in_channels = 3, .num_classes = classes}; }

TEST(ResNetParameters, ImageNetCountsMatchTorchvision) {
  EXPECT_EQ(parameter_count(*models::create_model("resnet18", imagenet())), 11'689'512);
  EXPECT_EQ(parameter_count(*models::create_model("resnet34", imagenet())), 21'797'672);
  EXPECT_EQ(parameter_count(*models::create_model("resnet50", imagenet())), 25'557'032);
}

TEST(ResNetParameters, SmallInputStemCountsMatchTorchvisionWithA3x3Stem) {
  // torchvision resnetXX(num_classes=10) with conv1 = Conv2d(3, 64, 3, 1, 1, bias=False) and
  // maxpool = Identity, counted with torchvision 0.14.
  models::ModelOptions o{.in_channels = 3, .num_classes = 10, .small_input_stem = true};
  EXPECT_EQ(parameter_count(*models::create_model("resnet18", o)), 11'173'962);
  EXPECT_EQ(parameter_count(*models::create_model("resnet50", o)), 23'520'842);
}

TEST(ResNetParameters, CifarResNetCounts) {
  // ResNet-20, option B, 3 input channels, 10 classes, counted by hand:
  //   stem 3*16*9 + BN 32 = 464; stage 1: 3 * (2 * 16*16*9 + 2 * 32) = 14,016;
  //   stage 2: (16*32*9 + 32*32*9 + 16*32 + 3 * 64) + 2 * (2 * 32*32*9 + 2 * 64) = 51,648;
  //   stage 3: (32*64*9 + 64*64*9 + 32*64 + 3 * 128) + 2 * (2 * 64*64*9 + 2 * 128) = 205,696;
  //   fc 64*10 + 10 = 650. Total 272,474 (He et al. quote ~0.27M).
  EXPECT_EQ(parameter_count(*models::create_model("resnet20", {.in_channels = 3, .num_classes = 10})), 272'474);
  // One input channel removes 2*16*9 stem weights.
  EXPECT_EQ(parameter_count(*models::create_model("resnet20", {.in_channels = 1, .num_classes = 10})),
            272'474 - 2 * 16 * 9);
  // Each extra pair of blocks per stage (32 = 20 + 12: two more blocks per stage) adds
  // 2 * (4,672 + 18,560 + 73,984) over the three stages.
  EXPECT_EQ(parameter_count(*models::create_model("resnet32", {.in_channels = 3, .num_classes = 10})),
            272'474 + 2 * (4'672 + 18'560 + 73'984));
  EXPECT_EQ(parameter_count(*models::create_model("resnet56", {.in_channels = 3, .num_classes = 10})),
            272'474 + 6 * (4'672 + 18'560 + 73'984));
}

TEST(ResNetNames, StateDictKeysAreTorchvisions) {
  EXPECT_EQ(state_names(*models::create_model("resnet18", imagenet())), torchvision_keys("resnet18"));
  EXPECT_EQ(state_names(*models::create_model("resnet50", imagenet())), torchvision_keys("resnet50"));
}

TEST(ResNetNames, CifarResNetUsesTheSameScheme) {
  const auto model = models::create_model("resnet20");
  const auto names = state_names(*model);
  for (const char* expected : {"conv1.weight", "bn1.running_mean", "layer1.0.conv1.weight", "layer1.2.bn2.bias",
                               "layer2.0.downsample.0.weight", "layer3.0.downsample.1.num_batches_tracked",
                               "fc.weight", "fc.bias"}) {
    EXPECT_TRUE(std::binary_search(names.begin(), names.end(), expected)) << expected;
  }
  EXPECT_FALSE(std::binary_search(names.begin(), names.end(), "layer1.0.downsample.0.weight"));
  EXPECT_FALSE(std::binary_search(names.begin(), names.end(), "layer4.0.conv1.weight"));
}

struct ShapeCase {
  std::string model;
  models::ModelOptions options;
  Shape input;
};

TEST(ResNetShapes, LogitsForSeveralInputSizes) {
  const std::vector<ShapeCase> cases = {
      {"resnet20", {.in_channels = 1, .num_classes = 10}, {2, 1, 28, 28}},
      {"resnet20", {.in_channels = 3, .num_classes = 7}, {3, 3, 32, 32}},
      {"resnet20", {.in_channels = 3, .num_classes = 10}, {1, 3, 17, 23}},  // odd sizes
      {"resnet32", {.in_channels = 2, .num_classes = 4}, {2, 2, 8, 8}},
      {"resnet18", imagenet(), {1, 3, 64, 64}},
      {"resnet18", imagenet(5), {2, 3, 33, 47}},
      {"resnet18", {.in_channels = 3, .num_classes = 10, .small_input_stem = true}, {2, 3, 32, 32}},
      {"resnet34", imagenet(3), {1, 3, 40, 40}},
      {"resnet50", imagenet(), {1, 3, 64, 64}},
  };
  NoGradGuard no_grad;
  for (const auto& c : cases) {
    auto model = models::create_model(c.model, c.options);
    model->eval();
    Generator g(1);
    const Tensor y = (*model)(randn(c.input, g));
    EXPECT_EQ(y.sizes(), (Shape{c.input[0], c.options.num_classes})) << c.model << " " << shape_str(c.input);
  }
}

TEST(ResNetShapes, WrongChannelCountIsAShapeError) {
  auto model = models::create_model("resnet20", {.in_channels = 1});
  EXPECT_THROW((*model)(zeros({1, 3, 16, 16})), ShapeError);
}

TEST(ResNetInit, ConvWeightsFollowTorchvisionsKaimingNormalFanOut) {
  auto model = models::create_model("resnet20");
  // layer3.1.conv1: 64 -> 64, 3x3: fan_out 576, std sqrt(2 / 576); 36,864 draws.
  Tensor w;
  for (const auto& [name, t] : model->named_parameters()) {
    if (name == "layer3.1.conv1.weight") w = t;
  }
  ASSERT_TRUE(w.defined());
  double sum = 0, sum_sq = 0;
  for (float v : w.to_vector<float>()) {
    sum += v;
    sum_sq += double(v) * v;
  }
  const double n = static_cast<double>(w.numel()), expected = std::sqrt(2.0 / 576.0);
  EXPECT_NEAR(sum / n, 0.0, 0.05 * expected);
  EXPECT_NEAR(std::sqrt(sum_sq / n), expected, 0.03 * expected);
}

}  // namespace
}  // namespace sublet
