// models/registry.h: names, the unknown-name error, seeding.
#include <gtest/gtest.h>

#include <string>

#include "core/errors.h"
#include "models/registry.h"

namespace sublet {
namespace {

TEST(ModelRegistry, ListsTheResNetsAndTheGPTs) {
  EXPECT_EQ(models::model_names(), (std::vector<std::string>{"resnet20", "resnet32", "resnet56", "resnet18", "resnet34",
                                                             "resnet50", "gpt-nano", "gpt-mini", "gpt2-small"}));
  for (const auto& name : models::model_names()) {
    if (name == "gpt2-small") continue;  // 124M parameters: test_gpt checks its shapes from the config
    EXPECT_NE(models::create_model(name, {.num_classes = 3, .vocab_size = 256}), nullptr) << name;
    EXPECT_EQ(models::is_language_model(name), name.rfind("gpt", 0) == 0) << name;
  }
}

TEST(ModelRegistry, UnknownNameListsTheKnownOnes) {
  try {
    models::create_model("resnet101");
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("resnet101"), std::string::npos) << message;
    for (const auto& name : models::model_names()) EXPECT_NE(message.find(name), std::string::npos) << message;
  }
}

TEST(ModelRegistry, SameSeedSameModelOtherSeedOtherModel) {
  auto a = models::create_model("resnet20", {.seed = 42});
  auto b = models::create_model("resnet20", {.seed = 42});
  auto c = models::create_model("resnet20", {.seed = 43});
  const auto pa = a->named_parameters(), pb = b->named_parameters(), pc = c->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  bool any_differs = false;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].second.to_vector<float>(), pb[i].second.to_vector<float>()) << pa[i].first;
    // BN weights/biases are constants; every conv and the fc differ between seeds.
    if (pa[i].second.to_vector<float>() != pc[i].second.to_vector<float>()) any_differs = true;
  }
  EXPECT_TRUE(any_differs);
  EXPECT_NE(pa[0].second.to_vector<float>(), pc[0].second.to_vector<float>());  // conv1.weight
}

}  // namespace
}  // namespace sublet
