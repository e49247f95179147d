// The segment map over time as a user draws it: `sublet profile` of gpt-nano on the CPU with a
// length drawn each step (the same draw as bench step's), and `sublet replay --segment-map` of the
// trace it wrote; the flag combinations that are refused.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "runtime/data/shape_schedule.h"
#include "tests/cli/cli_process.h"

namespace sublet {
namespace {

namespace fs = std::filesystem;
using cli_test::Outcome;
using cli_test::read_text;
using cli_test::run_sublet;
using cli_test::with;
using cli_test::both;

class SegmentMapCli : public ::testing::Test {
 protected:
  Outcome run(const std::vector<std::string>& args) { return run_sublet(args, {{"OMP_NUM_THREADS", "1"}}, dir_); }
  cli_test::ScratchDir scratch_{"sublet-segment-map"};
  const fs::path& dir_ = scratch_.path();
};

const std::vector<std::string> kProfile = {"profile", "--device", "cpu", "--model", "gpt-nano", "--classes", "256",
                                           "--steps", "3", "--timing-steps", "1", "--seed", "5"};

TEST_F(SegmentMapCli, ProfileDrawsEveryStepsShapeAndReplayDrawsTheTrace) {
  const Outcome o = run(with(kProfile, {"--seq-len-range", "8:64", "--tokens-per-batch", "256", "--out", "p"}));
  ASSERT_EQ(o.exit_code, 0) << both(o);
  const std::string map = read_text(dir_ / "p" / "segment_map.svg");
  // The steps bench step would draw from the same seed, each named with its shape.
  const data::ShapeSchedule schedule =
      data::token_schedule({.seed = 5, .steps = 3, .min_len = 8, .max_len = 64, .tokens_per_batch = 256});
  for (std::size_t i = 0; i < 3; ++i) {
    const std::string shape = fmt::format("batch {} x {} tokens", schedule.steps[i].batch, schedule.steps[i].seq_len);
    EXPECT_NE(map.find(">step " + std::to_string(i + 1) + "<"), std::string::npos) << i;
    EXPECT_NE(map.find(shape), std::string::npos) << shape;
    EXPECT_NE(o.out.find(shape), std::string::npos) << o.out;
  }
  EXPECT_NE(map.find("segment 1: "), std::string::npos);
  EXPECT_NE(map.find("#1 event "), std::string::npos);
  EXPECT_NE(read_text(dir_ / "p" / "memory.html").find("Segments over the run"), std::string::npos);

  const Outcome replayed = run({"replay", "p/alloc_trace.json", "--alloc-conf", "expandable_segments:True", "--segment-map", "m.svg"});
  ASSERT_EQ(replayed.exit_code, 0) << both(replayed);
  EXPECT_NE(replayed.out.find("Wrote the segment map under expandable_segments:True to m.svg"), std::string::npos) << replayed.out;
  const std::string replay_map = read_text(dir_ / "m.svg");
  EXPECT_NE(replay_map.find("segment 1: expandable"), std::string::npos);
  EXPECT_NE(replay_map.find("Segments over time: alloc_trace.json"), std::string::npos);
}

TEST_F(SegmentMapCli, ImageModelsTakeAResolutionEachStep) {
  const Outcome o = run({"profile", "--device", "cpu", "--model", "resnet20", "--batch-size", "2", "--input", "3x16x16",
                         "--resolutions", "16,8", "--steps", "3", "--timing-steps", "0", "--seed", "2", "--out", "p"});
  ASSERT_EQ(o.exit_code, 0) << both(o);
  const data::ShapeSchedule schedule =
      data::image_schedule({.seed = 2, .steps = 3, .batch_size = 2, .channels = 3, .resolutions = {16, 8}});
  const std::string map = read_text(dir_ / "p" / "segment_map.svg");
  for (const data::ShapeStep& step : schedule.steps) {
    const std::string shape = fmt::format("batch 2 x 3x{}x{}", step.height, step.width);
    EXPECT_NE(map.find(shape), std::string::npos) << shape;
  }
}

TEST_F(SegmentMapCli, RefusedCombinationsNameTheFlags) {
  const Outcome both_sources =
      run(with(kProfile, {"--seq-len-range", "8:64", "--tokens-per-batch", "256", "--resolutions", "32,16", "--out", "p"}));
  EXPECT_NE(both_sources.exit_code, 0);
  EXPECT_NE(both(both_sources).find("use one of them"), std::string::npos) << both(both_sources);
  const Outcome batch = run(with(kProfile, {"--seq-len-range", "8:64", "--tokens-per-batch", "256", "--batch-size", "4", "--out", "s"}));
  EXPECT_NE(batch.exit_code, 0);
  EXPECT_NE(both(batch).find("drop --batch-size"), std::string::npos) << both(batch);
  const Outcome too_long = run(with(kProfile, {"--seq-len-range", "104:128", "--tokens-per-batch", "256", "--out", "q"}));
  EXPECT_NE(too_long.exit_code, 0);
  EXPECT_NE(both(too_long).find("context of 64"), std::string::npos) << both(too_long);
  const Outcome images = run(with(kProfile, {"--resolutions", "32,16", "--out", "r"}));
  EXPECT_NE(images.exit_code, 0);
  EXPECT_NE(both(images).find("takes token windows"), std::string::npos) << both(images);

  std::ofstream(dir_ / "t.json") << R"({"format": "sublet-alloc-trace", "version": 2, "events": [{"action": "alloc", "id": 1, "size": 4096, "stream": 0}]})";
  const Outcome rules = run({"replay", "t.json", "--rules", "pytorch", "--segment-map", "m.svg"});
  EXPECT_NE(rules.exit_code, 0);
  EXPECT_NE(both(rules).find("--segment-map: draws sublet's allocator"), std::string::npos) << both(rules);
}

}  // namespace
}  // namespace sublet
