// sublet demo variable-length-oom's runs (bench/step/variable_length_oom.h) on the CPU: gpt-nano with a new window length each step, capped
// at the smallest cap, a page at a time from its uncapped live peak rounded up to a page plus one
// page, under which sublet's defaults (expandable segments) finish (here the first). PyTorch's default settings run out
// of memory while the live tensors and the failed request together fit the cap, and the error
// names holes and the setting that fixes them; sublet's defaults and expandable_segments:True
// finish within the cap. The run is deterministic: its outcome is asserted, not sampled.
#include <gtest/gtest.h>

#include <sstream>

#include "core/errors.h"
#include "bench/step/variable_length_oom.h"
#include "memory/config.h"
#include "memory/registry.h"

namespace sublet::bench {
namespace {

TEST(VariableLengthOom, PytorchDefaultsFailWithRoomToSpareAndTheFixesFinish) {
  VariableLengthOomOptions options;  // gpt-nano, lengths 8..64, about 2048 tokens a step, 12 steps
  const OomDemoResult r = run_variable_length_oom(options);
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_GT(r.uncapped_peak_allocated, 0u);
  EXPECT_EQ(r.capacity % (2 * memory::kMiB), 0u);
  EXPECT_GT(r.capacity, r.uncapped_peak_allocated);
  EXPECT_LE(r.capacity, r.uncapped_peak_allocated + 4 * memory::kMiB);

  const OomDemoRow& pytorch = r.rows[0];
  EXPECT_EQ(pytorch.label, "pytorch");
  EXPECT_EQ(pytorch.alloc_conf, "");
  EXPECT_FALSE(pytorch.finished);
  // Not a lack of memory: the live tensors and the request fit the cap together, the live
  // tensors alone hold under three quarters of it, and what blocked the request were holes.
  EXPECT_GT(pytorch.failed_request, 0u);
  EXPECT_LE(pytorch.allocated_at_failure + pytorch.failed_request, r.capacity);
  EXPECT_LT(pytorch.allocated_at_failure, r.capacity * 3 / 4);
  EXPECT_GT(pytorch.reserved_at_failure + pytorch.failed_request, r.capacity);
  EXPECT_NE(pytorch.message.find("The largest kind is holes"), std::string::npos) << pytorch.message;
  EXPECT_NE(pytorch.message.find("expandable_segments:True"), std::string::npos) << pytorch.message;
  EXPECT_GE(pytorch.retries, 1);

  const OomDemoRow& sublet = r.rows[1];
  EXPECT_EQ(sublet.alloc_conf, memory::default_config(Device::cpu()).to_string());
  const OomDemoRow& knob = r.rows[2];
  EXPECT_EQ(knob.alloc_conf, "expandable_segments:True");
  EXPECT_TRUE(knob.finished);
  EXPECT_LE(knob.peak_reserved, r.capacity);
  EXPECT_EQ(knob.peak_allocated, r.uncapped_peak_allocated);  // the same steps, all of them
  // sublet's defaults (expandable segments) finish too.
  EXPECT_TRUE(sublet.finished);
  EXPECT_LE(sublet.peak_reserved, r.capacity);
}

// The cap search: every threshold is found exactly, in about 2 log2 calls, and a threshold past
// the limit is reported as none.
TEST(VariableLengthOom, TheCapSearchFindsTheSmallestFinishingCap) {
  for (std::size_t threshold : {0u, 1u, 2u, 3u, 5u, 17u, 64u, 100u, 4095u, 4096u}) {
    int calls = 0;
    const auto found = smallest_finishing_cap(
        [&](std::size_t at) {
          ++calls;
          return at >= threshold;
        },
        4096);
    ASSERT_TRUE(found.has_value()) << threshold;
    EXPECT_EQ(*found, threshold);
    EXPECT_LE(calls, 2 * 13 + 2) << threshold;
  }
  EXPECT_FALSE(smallest_finishing_cap([](std::size_t at) { return at > 4096; }, 4096).has_value());
}

TEST(VariableLengthOom, AGivenCapacityIsUsedAndABadKnobIsRefused) {
  VariableLengthOomOptions options;
  options.knob = "expandable_segments:maybe";
  EXPECT_THROW(run_variable_length_oom(options), ConfigError);  // before any run
  options.knob = "expandable_segments:True";
  options.steps = 1;
  options.capacity_bytes = 1024 * memory::kMiB;  // room for any setting: no calibration, no failure
  std::ostringstream out;
  EXPECT_EQ(variable_length_oom_demo(options, out), 1);  // nothing ran out of memory: said so
  const std::string text = out.str();
  EXPECT_NE(text.find("capped at 1.00 GiB"), std::string::npos) << text;
  EXPECT_EQ(text.find("Uncapped"), std::string::npos) << text;
  EXPECT_EQ(text.find(" OOM "), std::string::npos) << text;
  EXPECT_NE(text.find("This run did not show it"), std::string::npos) << text;
}

}  // namespace
}  // namespace sublet::bench
