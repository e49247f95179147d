// runtime/data/shape_schedule: seeded per-step shapes, their JSON file and its validation.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "runtime/data/shape_schedule.h"
#include "core/errors.h"
#include "../bench/scratch_file.h"
#include "tests/throw_message.h"

namespace sublet {
namespace {

::testing::AssertionResult contains(const std::string& message, const std::string& text) {
  if (message.find(text) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "the message \"" << message << "\" lacks \"" << text << "\"";
}

// `expr` throws `type` with a message that contains `text`.
#define EXPECT_THROW_MESSAGE(expr, type, text) \
  EXPECT_TRUE(contains(testing::message_of<type>([&] { (void)(expr); }), text))

using data::ShapeSchedule;

ShapeSchedule tokens(std::uint64_t seed, std::int64_t steps = 200) {
  return data::token_schedule({.seed = seed, .steps = steps, .min_len = 64, .max_len = 1024, .tokens_per_batch = 16384});
}

TEST(ShapeSchedule, TheSameSeedGivesTheSameStepsAndAnotherSeedOthers) {
  EXPECT_EQ(tokens(3), tokens(3));
  EXPECT_NE(tokens(3).steps, tokens(4).steps);
  const ShapeSchedule images = data::image_schedule({.seed = 5, .steps = 50, .batch_size = 8, .resolutions = {224, 192, 160}});
  EXPECT_EQ(images, data::image_schedule({.seed = 5, .steps = 50, .batch_size = 8, .resolutions = {224, 192, 160}}));
}

TEST(ShapeSchedule, DrawsAreFixedByTheSeedOnEveryStandardLibrary) {
  // The draw reads mt19937_64's raw output (fixed by the standard), never a distribution object
  // (which differs between libstdc++ and libc++): these are the first lengths of seed 0 for good,
  // as a separate implementation of MT19937-64 (Matsumoto and Nishimura's reference) gives them.
  const ShapeSchedule s = tokens(0, 4);
  std::vector<std::int64_t> lengths;
  for (const auto& step : s.steps) lengths.push_back(step.seq_len);
  EXPECT_EQ(lengths, (std::vector<std::int64_t>{728, 416, 216, 360}));
}

TEST(ShapeSchedule, LengthsAreMultiplesOfEightWithinTheRangeAndBatchesKeepTheTokens) {
  const ShapeSchedule s = data::token_schedule({.seed = 1, .steps = 500, .min_len = 61, .max_len = 128, .tokens_per_batch = 1000});
  std::set<std::int64_t> seen;
  for (const auto& step : s.steps) {
    EXPECT_EQ(step.seq_len % 8, 0) << step.seq_len;
    EXPECT_GE(step.seq_len, 64);  // 61 rounds up to 64
    EXPECT_LE(step.seq_len, 128);
    EXPECT_EQ(step.batch, 1000 / step.seq_len);
    seen.insert(step.seq_len);
  }
  EXPECT_EQ(seen.size(), 9u);  // 64, 72, ..., 128: every multiple of 8 in range is drawn in 500 steps
  EXPECT_EQ(s.longest(), 128);
  // A batch never drops to zero, however few tokens per batch.
  const ShapeSchedule tiny = data::token_schedule({.seed = 1, .steps = 10, .min_len = 16, .max_len = 64, .tokens_per_batch = 8});
  for (const auto& step : tiny.steps) EXPECT_EQ(step.batch, 1);
}

TEST(ShapeSchedule, ImageStepsDrawFromTheListWithAFixedBatch) {
  const ShapeSchedule s = data::image_schedule({.seed = 2, .steps = 300, .batch_size = 16, .channels = 1, .resolutions = {32, 24}});
  std::set<std::int64_t> seen;
  for (const auto& step : s.steps) {
    EXPECT_EQ(step.batch, 16);
    EXPECT_EQ(step.channels, 1);
    EXPECT_EQ(step.height, step.width);
    seen.insert(step.height);
  }
  EXPECT_EQ(seen, (std::set<std::int64_t>{24, 32}));
  EXPECT_EQ(s.describe(), "1x{32,24}");
}

TEST(ShapeSchedule, RefusesBadSpecsWithTheReason) {
  EXPECT_THROW_MESSAGE(data::token_schedule({.steps = 3, .min_len = 64, .max_len = 1020, .tokens_per_batch = 100}), ValueError,
                       "multiple of 8, so the longest must be one (e.g. 1016)");
  EXPECT_THROW_MESSAGE(data::token_schedule({.steps = 3, .min_len = 128, .max_len = 64, .tokens_per_batch = 100}), ValueError,
                       "the shortest length is above the longest");
  EXPECT_THROW_MESSAGE(data::token_schedule({.steps = 3, .min_len = 8, .max_len = 64, .tokens_per_batch = 0}), ValueError,
                       "tokens per batch must be in [1, 16777216], got 0");
  EXPECT_THROW_MESSAGE(data::image_schedule({.steps = 3, .batch_size = 4, .resolutions = {}}), ValueError, "at least one resolution");
  EXPECT_EQ(data::parse_seq_len_range("64:1024"), (std::pair<std::int64_t, std::int64_t>{64, 1024}));
  for (const char* bad : {"64", "64:", ":64", "0:64", "64:32", "a:b", "-8:64", "64:1024:2"})
    EXPECT_THROW_MESSAGE(data::parse_seq_len_range(bad), ValueError, "expected MIN:MAX") << bad;
  EXPECT_EQ(data::parse_resolutions("224,192,160"), (std::vector<std::int64_t>{224, 192, 160}));
  for (const char* bad : {"", "224,", ",224", "224,,192", "0", "22x4"})
    EXPECT_THROW_MESSAGE(data::parse_resolutions(bad), ValueError, "comma-separated list of positive sides") << bad;
}

TEST(ShapeSchedule, JsonRoundTripsBothKinds) {
  for (const ShapeSchedule& s : {tokens(9, 20), data::image_schedule({.seed = 4, .steps = 7, .batch_size = 3,
                                                                        .resolutions = {96, 64}})}) {
    const testing::ScratchFile file("");
    data::save_shape_schedule(file.path(), s);
    EXPECT_EQ(data::load_shape_schedule(file.path()), s);
  }
  const nlohmann::json j = data::shape_schedule_json(tokens(9, 2));
  EXPECT_EQ(j["format"], "sublet-shape-schedule");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["steps"].size(), 2u);
  EXPECT_EQ(j["steps"][0]["batch"].get<std::int64_t>() * 0 + j["steps"][0]["seq_len"].get<std::int64_t>() % 8, 0);
}

TEST(ShapeSchedule, BadFilesNameWhatWasExpectedAndFound) {
  const nlohmann::json good = data::shape_schedule_json(tokens(1, 3));
  const auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& message) {
    nlohmann::json j = good;
    edit(j);
    const testing::ScratchFile file(j.dump());
    EXPECT_THROW_MESSAGE(data::load_shape_schedule(file.path()), ValueError, message) << j.dump();
  };
  refused([](nlohmann::json& j) { j["version"] = 2; }, "unknown \"version\" 2 (this sublet reads version 1)");
  refused([](nlohmann::json& j) { j["format"] = "sublet-alloc-trace"; }, "\"format\" must be \"sublet-shape-schedule\"");
  refused([](nlohmann::json& j) { j["kind"] = "audio"; }, "\"kind\" must be \"tokens\" or \"images\", found \"audio\"");
  refused([](nlohmann::json& j) { j["steps"][1]["seq_len"] = 0; }, "step 1: \"seq_len\" must be in [1, 16777216], found 0");
  refused([](nlohmann::json& j) { j["steps"][2]["batch"] = -4; }, "step 2: \"batch\" must be in [1, 16777216], found -4");
  refused([](nlohmann::json& j) { j["steps"][0]["seq_len"] = "long"; }, "step 0: \"seq_len\" must be an integer, found \"long\"");
  refused([](nlohmann::json& j) { j["steps"][0].erase("batch"); }, "step 0: the key \"batch\" is missing");
  refused([](nlohmann::json& j) { j["steps"] = nlohmann::json::array(); }, "\"steps\" must be a non-empty list");
  refused([](nlohmann::json& j) { j.erase("tokens_per_batch"); }, "the key \"tokens_per_batch\" is missing");
  refused([](nlohmann::json& j) { j = nlohmann::json::array(); }, "expected a JSON object, found array");
  const nlohmann::json images = data::shape_schedule_json(data::image_schedule({.steps = 2, .batch_size = 2, .resolutions = {8}}));
  nlohmann::json bad_input = images;
  bad_input["steps"][1]["input"] = {3, 8};
  const testing::ScratchFile two_dims(bad_input.dump());
  EXPECT_THROW_MESSAGE(data::load_shape_schedule(two_dims.path()), ValueError, "step 1: \"input\" must be [C, H, W], found [3,8]");
  const testing::ScratchFile not_json("{\"format\": ");
  EXPECT_THROW_MESSAGE(data::load_shape_schedule(not_json.path()), ValueError, "not valid JSON");
}

TEST(ShapeSchedule, RunChecksNameTheContextAndTheStepCount) {
  const ShapeSchedule s = tokens(0, 10);
  const auto needs = [](std::string model, bool language_model, std::int64_t context, std::int64_t steps) {
    return data::ScheduleNeeds{.model = std::move(model), .language_model = language_model, .context = context,
                               .steps = steps, .steps_source = "warm-up + timed steps",
                               .context_hint = "--block-size sets a longer one"};
  };
  EXPECT_NO_THROW(data::check_schedule_for_run(s, needs("gpt2-small", true, 1024, 10)));
  EXPECT_THROW_MESSAGE(data::check_schedule_for_run(s, needs("gpt-mini", true, 256, 10)), ValueError,
                       "a length of 1024 passes gpt-mini's context of 256 (--block-size sets a longer one)");
  EXPECT_THROW_MESSAGE(data::check_schedule_for_run(s, needs("gpt2-small", true, 1024, 11)), ValueError,
                       "10 steps, but the run needs 11 (warm-up + timed steps)");
  EXPECT_THROW_MESSAGE(data::check_schedule_for_run(s, needs("resnet20", false, 0, 10)), ValueError,
                       "resnet20 takes images (--resolutions), the schedule holds token windows");
  // The drawn MAX bounds the context even when no step drew it; a file's longest step does too.
  ShapeSchedule short_draws = data::token_schedule({.seed = 0, .steps = 1, .min_len = 8, .max_len = 128, .tokens_per_batch = 64});
  short_draws.steps = {{.batch = 8, .seq_len = 8}};
  EXPECT_THROW_MESSAGE(data::check_schedule_for_run(short_draws, needs("gpt-nano", true, 64, 1)), ValueError,
                       "a length of 128 passes gpt-nano's context of 64");
  ShapeSchedule edited = short_draws;
  edited.max_len = 64;
  edited.steps = {{.batch = 1, .seq_len = 72}};
  EXPECT_THROW_MESSAGE(data::check_schedule_for_run(edited, needs("gpt-nano", true, 64, 1)), ValueError,
                       "a length of 72 passes gpt-nano's context of 64");
}

TEST(ShapeSchedule, StepsDigestTellsTheStepsAlreadyTrainedApart) {
  const ShapeSchedule a = tokens(1, 20);
  ShapeSchedule longer = tokens(1, 30);  // the same seed draws the same first steps
  EXPECT_EQ(data::steps_digest(a, 20), data::steps_digest(longer, 20));
  EXPECT_NE(data::steps_digest(a, 20), data::steps_digest(tokens(2, 20), 20));
  longer.steps[19].batch += 1;
  EXPECT_NE(data::steps_digest(a, 20), data::steps_digest(longer, 20));
  EXPECT_EQ(data::steps_digest(a, 19), data::steps_digest(longer, 19));
  EXPECT_THROW_MESSAGE(data::steps_digest(a, 21), ValueError, "a digest of 21 steps asked of a schedule of 20");
}

}  // namespace
}  // namespace sublet
