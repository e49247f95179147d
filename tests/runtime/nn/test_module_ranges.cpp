// Module ranges (runtime/nn/module_ranges.h) with a recording sink in place of NVTX: every
// module of a ResNet-20 gets one forward range per call and one backward range per backward,
// named by its dotted path; every range that starts ends; a child's forward range lies inside
// its parent's; and nothing is recorded once the ModuleRanges is gone.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "models/registry.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/module_ranges.h"

namespace sublet::nn {
namespace {

struct Recorder final : RangeSink {
  struct Range {
    std::string name;
    int start = -1;
    int end = -1;  // order of events; -1 while open
  };
  std::vector<Range> ranges;
  int clock = 0;
  std::uint64_t start(const std::string& name) override {
    ranges.push_back({name, clock++, -1});
    return ranges.size();  // ids start at 1, as NVTX's
  }
  void end(std::uint64_t id) override {
    ASSERT_GE(id, 1u);
    ASSERT_LE(id, ranges.size());
    ASSERT_EQ(ranges[id - 1].end, -1) << ranges[id - 1].name << " ended twice";
    ranges[id - 1].end = clock++;
  }
  const Range* find(const std::string& name) const {
    for (const Range& r : ranges)
      if (r.name == name) return &r;
    return nullptr;
  }
};

TEST(ModuleRanges, EveryModuleGetsAForwardAndABackwardRange) {
  models::ModelOptions options;
  options.num_classes = 10;
  auto model = models::create_model("resnet20", options);
  model->train();
  auto recorder = std::make_shared<Recorder>();
  const Tensor images = randn({2, 3, 8, 8});
  const Tensor labels = Tensor::from_vector(std::vector<std::int64_t>{1, 7}, {2});
  std::set<std::string> called;  // what a plain forward pre-hook sees (BasicBlock's relu modules are not called)
  for (const auto& [path, module] : model->named_modules())
    module->register_forward_pre_hook([&called, name = path.empty() ? std::string("model") : "model." + path](
                                          Module&, const Tensor&) { called.insert(name); });
  {
    ModuleRanges ranges(*model, recorder, "model");
    nn::functional::cross_entropy((*model)(images), labels).backward();
  }
  const std::size_t modules = called.size();
  ASSERT_GT(modules, 50u);
  std::map<std::string, int> forward, backward;
  for (const auto& r : recorder->ranges) {
    EXPECT_NE(r.end, -1) << r.name << " never ended";
    const bool is_forward = r.name.ends_with(" forward");
    ++(is_forward ? forward : backward)[r.name.substr(0, r.name.rfind(' '))];
  }
  EXPECT_EQ(forward.size(), modules);
  for (const std::string& name : called) EXPECT_EQ(forward.count(name), 1u) << name;
  for (const auto& [name, count] : forward) EXPECT_EQ(count, 1) << name;
  for (const auto& [name, count] : backward) EXPECT_EQ(count, 1) << name;
  EXPECT_GT(backward.size(), modules / 2) << "backward ranges for the modules on the gradient's path";
  // Nesting: the block's forward contains its first convolution's; backward runs after forward.
  const auto* block = recorder->find("model.layer1.0 forward");
  const auto* conv = recorder->find("model.layer1.0.conv1 forward");
  const auto* conv_back = recorder->find("model.layer1.0.conv1 backward");
  ASSERT_TRUE(block && conv && conv_back);
  EXPECT_LT(block->start, conv->start);
  EXPECT_GT(block->end, conv->end);
  EXPECT_GT(conv_back->start, recorder->find("model forward")->end);

  const std::size_t recorded = recorder->ranges.size();
  nn::functional::cross_entropy((*model)(images), labels).backward();
  EXPECT_EQ(recorder->ranges.size(), recorded) << "hooks left behind after the ModuleRanges died";
}

}  // namespace
}  // namespace sublet::nn
