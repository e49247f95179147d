// The step diff: blocks alive after a later step with no counterpart after an earlier one.
#include <gtest/gtest.h>

#include "memory/annotation.h"
#include "profile/step_diff.h"

namespace sublet::profile {
namespace {

memory::SegmentInfo segment(std::vector<std::tuple<std::string, memory::BlockCategory, std::size_t, bool>> blocks) {
  memory::SegmentInfo s;
  std::uintptr_t address = 0x10000;
  s.address = address;
  for (const auto& [annotation, category, size, allocated] : blocks) {
    memory::BlockInfo b;
    b.address = address;
    b.size = size;
    b.requested_size = allocated ? size : 0;
    b.state = allocated ? memory::BlockInfo::State::ActiveAllocated : memory::BlockInfo::State::Inactive;
    b.category = category;
    b.annotation = memory::intern_annotation(annotation);
    s.blocks.push_back(b);
    s.total_size += size;
    address += size;
  }
  return s;
}

using C = memory::BlockCategory;

TEST(StepDiff, SteadyStepsLeaveNothingBehind) {
  // Same blocks at other addresses (gradients re-made each step): no difference.
  const auto one = segment({{"fc/bwd", C::Gradient, 2048, true}, {"", C::Unknown, 512, false}, {"(setup)", C::Parameter, 2048, true}});
  const auto two = segment({{"", C::Unknown, 512, false}, {"fc/bwd", C::Gradient, 2048, true}, {"(setup)", C::Parameter, 2048, true}});
  const StepDiff d = diff_steps(1, {one}, 2, {two});
  EXPECT_TRUE(d.added.empty());
  EXPECT_TRUE(d.removed.empty());
  EXPECT_NE(format_step_diff(d).find("none: step 2 leaves nothing behind"), std::string::npos);
}

TEST(StepDiff, GrowthIsGroupedByAnnotationAndCategory) {
  const auto one = segment({{"(setup)", C::Parameter, 2048, true}, {"fc/bwd", C::Gradient, 2048, true}});
  // Step 2 keeps the loss's graph alive (two activations of the fc layer) and a second gradient
  // block of another size appears; one block of step 1 is gone.
  const auto two = segment({{"(setup)", C::Parameter, 2048, true}, {"fc/fwd", C::Activation, 4096, true},
                            {"fc/fwd", C::Activation, 1024, true}, {"fc/bwd", C::Gradient, 512, true},
                            {"fc/bwd", C::Gradient, 512, false}});
  const StepDiff d = diff_steps(1, {one}, 2, {two});
  ASSERT_EQ(d.added.size(), 2u);
  EXPECT_EQ(d.added[0].annotation, "fc/fwd");
  EXPECT_EQ(d.added[0].category, Category::Activation);
  EXPECT_EQ(d.added[0].count, 2);
  EXPECT_EQ(d.added[0].bytes, 5120);
  EXPECT_EQ(d.added[1].annotation, "fc/bwd");
  EXPECT_EQ(d.added[1].bytes, 512);
  EXPECT_EQ(d.added_bytes, 5632);
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0].bytes, 2048);
  EXPECT_EQ(d.removed[0].category, Category::Gradient);
}

}  // namespace
}  // namespace sublet::profile
