// `sublet bench step` with a shape each step and an allocator-settings sweep, as a user runs it:
// gpt-nano on the CPU (whose tensors go through the same caching allocator over host memory) with
// a short seeded schedule, the schedule file written and read back, each row's columns equal to
// the allocator statistics it reports, the rows differing where the allocator really differs,
// and the flag combinations that are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/cli_process.h"

namespace sublet {
namespace {

namespace fs = std::filesystem;
using cli_test::Outcome;
using cli_test::read_text;
using cli_test::run_sublet;
using cli_test::with;
using cli_test::both;

class BenchStepShapesCli : public ::testing::Test {
 protected:
  Outcome run(const std::vector<std::string>& args) {
    std::vector<std::string> all = {"bench", "step", "--device", "cpu"};
    all.insert(all.end(), args.begin(), args.end());
    return run_sublet(all, {{"OMP_NUM_THREADS", "1"}}, dir_);
  }
  nlohmann::json json(const std::string& name) { return nlohmann::json::parse(read_text(dir_ / name)); }
  cli_test::ScratchDir scratch_{"sublet-bench-shapes"};
  const fs::path& dir_ = scratch_.path();
};

const std::vector<std::string> kNanoSchedule = {"--model", "gpt-nano", "--vocab", "256", "--seq-len-range", "8:64",
                                                "--tokens-per-batch", "256", "--warmup", "1", "--steps", "5"};

TEST_F(BenchStepShapesCli, ASeededScheduleIsWrittenReadBackAndReportedPerToken) {
  const Outcome drawn = run(with(kNanoSchedule, {"--seed", "3", "--write-shape-schedule", "s.json", "--json", "a.json"}));
  ASSERT_EQ(drawn.exit_code, 0) << both(drawn);
  const nlohmann::json schedule = json("s.json");
  EXPECT_EQ(schedule["format"], "sublet-shape-schedule");
  ASSERT_EQ(schedule["steps"].size(), 6u);  // warm-up + timed steps
  std::int64_t timed_tokens = 0;
  for (std::size_t i = 0; i < 6; ++i) {
    const std::int64_t len = schedule["steps"][i]["seq_len"], batch = schedule["steps"][i]["batch"];
    EXPECT_EQ(len % 8, 0);
    EXPECT_EQ(batch, std::max<std::int64_t>(1, 256 / len));
    if (i >= 1) timed_tokens += batch * len;
  }
  const nlohmann::json a = json("a.json");
  EXPECT_EQ(a["input"], "varies");
  EXPECT_EQ(a["timed_samples"], timed_tokens);
  double total_ms = 0;
  for (double ms : a["step_ms"]) total_ms += ms;
  EXPECT_NEAR(a["us_per_token"].get<double>(), total_ms * 1000.0 / static_cast<double>(timed_tokens), 1e-6);
  EXPECT_NE(drawn.out.find("us per token"), std::string::npos) << drawn.out;

  // The same file read back runs the same shapes: the same tokens, the same allocator peak.
  const Outcome read = run({"--model", "gpt-nano", "--vocab", "256", "--warmup", "1", "--steps", "5", "--shape-schedule",
                            "s.json", "--json", "b.json"});
  ASSERT_EQ(read.exit_code, 0) << both(read);
  const nlohmann::json b = json("b.json");
  EXPECT_EQ(b["timed_samples"], timed_tokens);
  EXPECT_EQ(b["peak_allocated_bytes"], a["peak_allocated_bytes"]);
  // Another seed draws other lengths.
  ASSERT_EQ(run(with(kNanoSchedule, {"--seed", "4", "--write-shape-schedule", "t.json"})).exit_code, 0);
  EXPECT_NE(json("t.json")["steps"], schedule["steps"]);
}

TEST_F(BenchStepShapesCli, TheSweepPrintsOneRowPerSettingReadFromTheAllocatorsStatistics) {
  // A vocabulary of 4,096 and 2,048 tokens a step: the logits (up to 32 MiB) and their gradients
  // need large-pool segments, whose number and size the settings change.
  const Outcome o = run({"--model", "gpt-nano", "--vocab", "4096", "--seq-len-range", "8:64", "--tokens-per-batch", "2048",
                         "--warmup", "1", "--steps", "5", "--alloc-conf-sweep", "--json", "sweep.json"});
  ASSERT_EQ(o.exit_code, 0) << both(o);
  const nlohmann::json report = json("sweep.json");
  EXPECT_EQ(report["format"], "sublet-alloc-conf-sweep");
  ASSERT_EQ(report["rows"].size(), 6u);
  std::vector<std::string> labels;
  for (const auto& row : report["rows"]) {
    labels.push_back(row["label"]);
    EXPECT_NE(o.out.find(row["label"].get<std::string>() + " "), std::string::npos) << o.out;
    // Every column is the allocator's own figure, over the whole run.
    const nlohmann::json& s = row["memory_stats"];
    EXPECT_EQ(row["peak_allocated_bytes"], s["allocated_bytes.all.peak"]);
    EXPECT_EQ(row["peak_reserved_bytes"], s["reserved_bytes.all.peak"]);
    EXPECT_EQ(row["reserved_unallocated_at_peak_bytes"].get<std::int64_t>(),
              s["waste.holes_bytes.all.at_peak"].get<std::int64_t>() +
                  s["waste.free_segments_bytes.all.at_peak"].get<std::int64_t>() +
                  s["waste.mapped_unused_bytes.all.at_peak"].get<std::int64_t>());
    EXPECT_EQ(row["segments_created"], s["segment.all.allocated"]);
    EXPECT_EQ(row["device_allocations"], s["num_device_alloc"]);
    EXPECT_EQ(row["alloc_retries"], s["num_alloc_retries"]);
    EXPECT_EQ(row["ooms"], s["num_ooms"]);
    EXPECT_DOUBLE_EQ(row["reserved_per_allocated"].get<double>(),
                     s["reserved_bytes.all.peak"].get<double>() / s["allocated_bytes.all.peak"].get<double>());
    EXPECT_EQ(row["us_per_token"], row["run"]["us_per_token"]);
    EXPECT_GT(row["us_per_token"].get<double>(), 0.0);
    // The same steps ran under every setting.
    EXPECT_EQ(row["run"]["timed_samples"], report["rows"][0]["run"]["timed_samples"]);
  }
  EXPECT_EQ(labels, (std::vector<std::string>{"pytorch", "max_split_size_mb:512", "roundup_power2_divisions:16",
                                              "max_split_size_mb:512,roundup_power2_divisions:16",
                                              "expandable_segments:True", "sublet"}));
  const auto& rows = report["rows"];
  const auto figures = [](const nlohmann::json& row) {
    return std::vector<nlohmann::json>{row["peak_allocated_bytes"], row["peak_reserved_bytes"],
                                       row["reserved_unallocated_at_peak_bytes"], row["segments_created"],
                                       row["device_allocations"]};
  };
  const auto bytes = [](const nlohmann::json& row, const char* key) { return row[key].get<std::int64_t>(); };
  // sublet's defaults are expandable segments, on the CPU too: the same figures as that row.
  EXPECT_EQ(figures(rows[5]), figures(rows[4]));
  // No block of this run reaches 512 MiB, so max_split_size_mb:512 never applies.
  EXPECT_EQ(figures(rows[1]), figures(rows[0]));
  // roundup_power2_divisions rounds sizes up to one of 16 steps per power of two: only more bytes.
  EXPECT_GE(bytes(rows[2], "peak_allocated_bytes"), bytes(rows[0], "peak_allocated_bytes"));
  // Expandable segments: one segment grows (by more mapping calls) where fixed segments are made
  // per cache miss, so less is reserved and almost nothing lies unallocated at the reserved peak
  // (with fixed segments, most of what was reserved by then).
  EXPECT_EQ(rows[4]["segments_created"], 1);
  EXPECT_GT(rows[0]["segments_created"].get<std::int64_t>(), 1);
  EXPECT_GT(rows[4]["device_allocations"].get<std::int64_t>(), rows[4]["segments_created"].get<std::int64_t>());
  EXPECT_LT(bytes(rows[4], "peak_reserved_bytes"), bytes(rows[0], "peak_reserved_bytes"));
  EXPECT_LT(bytes(rows[4], "reserved_unallocated_at_peak_bytes"), 4 * 1024 * 1024);
  EXPECT_GT(bytes(rows[0], "reserved_unallocated_at_peak_bytes"), 16 * bytes(rows[4], "reserved_unallocated_at_peak_bytes"));
  for (const auto& row : rows) {
    EXPECT_EQ(row["ooms"], 0);
    EXPECT_EQ(row["alloc_retries"], 0);
  }
}

// `sublet replay` of the run's allocation trace gives the sweep's columns: the same requests
// through the same allocator rules, so the same figures for each setting.
TEST_F(BenchStepShapesCli, AReplayOfTheRecordedTraceGivesTheSweepsColumns) {
  const std::vector<std::string> workload = {"--model", "gpt-nano", "--vocab", "4096", "--seq-len-range", "8:64",
                                             "--tokens-per-batch", "2048", "--warmup", "1", "--steps", "2"};
  const Outcome recorded = run(with(workload, {"--alloc-trace", "trace.json"}));
  ASSERT_EQ(recorded.exit_code, 0) << both(recorded);
  const Outcome swept = run(with(workload, {"--alloc-conf-sweep=pytorch;expandable_segments:True", "--json", "s.json"}));
  ASSERT_EQ(swept.exit_code, 0) << both(swept);
  const Outcome replayed = run_sublet({"replay", "trace.json", "--alloc-conf", "", "--alloc-conf", "expandable_segments:True",
                                       "--json", "r.json"},
                                      {}, dir_);
  ASSERT_EQ(replayed.exit_code, 0) << both(replayed);
  EXPECT_NE(replayed.out.find("unalloc@peak"), std::string::npos) << replayed.out;
  const nlohmann::json sweep = json("s.json"), replay = json("r.json");
  ASSERT_EQ(replay["rows"].size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const nlohmann::json& a = sweep["rows"][i];
    const nlohmann::json& b = replay["rows"][i]["sweep"];
    for (const char* key : {"peak_allocated_bytes", "peak_reserved_bytes", "reserved_unallocated_at_peak_bytes",
                            "segments_created", "device_allocations", "alloc_retries", "ooms"})
      EXPECT_EQ(a[key], b[key]) << "row " << i << ": " << key;
    EXPECT_TRUE(b["us_per_token"].is_null());
  }
}

TEST_F(BenchStepShapesCli, AGivenSweepListRunsThoseSettings) {
  const Outcome o = run(with(kNanoSchedule, {"--alloc-conf-sweep=expandable_segments:True;pytorch", "--json", "l.json"}));
  ASSERT_EQ(o.exit_code, 0) << both(o);
  const nlohmann::json report = json("l.json");
  ASSERT_EQ(report["rows"].size(), 2u);
  EXPECT_EQ(report["rows"][0]["alloc_conf"], "expandable_segments:True");
  EXPECT_EQ(report["rows"][1]["alloc_conf"], "");
}

TEST_F(BenchStepShapesCli, RefusesFlagsThatDoNotGoTogether) {
  const auto refused = [&](const std::vector<std::string>& args, const std::string& message) {
    const Outcome o = run(args);
    EXPECT_NE(o.exit_code, 0) << both(o);
    EXPECT_NE(o.err.find(message), std::string::npos) << o.err;
  };
  refused({"--model", "gpt-nano", "--seq-len-range", "8:64"}, "--seq-len-range and --tokens-per-batch go together");
  refused({"--model", "gpt-nano", "--seq-len-range", "8:60", "--tokens-per-batch", "64"},
          "the longest must be one (e.g. 56)");
  refused({"--model", "gpt-nano", "--seq-len-range", "8:128", "--tokens-per-batch", "64"},
          "a length of 128 passes gpt-nano's context of 64 (--block-size sets a longer one)");
  refused({"--model", "gpt-nano", "--seq-len-range", "64:8", "--tokens-per-batch", "64"}, "expected MIN:MAX");
  refused({"--model", "resnet20", "--seq-len-range", "8:64", "--tokens-per-batch", "64"},
          "resnet20 takes images (--resolutions), the schedule holds token windows");
  refused(with(kNanoSchedule, {"--batch-size", "4"}), "each step's batch is tokens / length; drop --batch-size");
  refused(with(kNanoSchedule, {"--resolutions", "32"}), "use one of them");
  refused({"--model", "gpt-nano", "--write-shape-schedule", "w.json"}, "give one of them");
  refused(with(kNanoSchedule, {"--alloc-conf-sweep", "--allocator", "raw"}), "drop --allocator raw");
  refused(with(kNanoSchedule, {"--alloc-conf-sweep=pytorch;max_split_size_mb:8"}),
          "--alloc-conf-sweep: bad value '8' for max_split_size_mb");
  ASSERT_EQ(run(with(kNanoSchedule, {"--write-shape-schedule", "ok.json"})).exit_code, 0);
  refused({"--model", "gpt-nano", "--shape-schedule", "ok.json", "--batch-size", "4"},
          "the file sets every step's batch and shape; drop --batch-size and --input");
  std::ofstream(dir_ / "v2.json") << R"({"format": "sublet-shape-schedule", "version": 2})";
  refused({"--model", "gpt-nano", "--shape-schedule", "v2.json"}, "unknown \"version\" 2");
  EXPECT_FALSE(fs::exists(dir_ / "w.json"));
}

TEST_F(BenchStepShapesCli, ImageModelsTakeAResolutionEachStep) {
  const Outcome o = run({"--model", "resnet20", "--input", "1x8x8", "--batch-size", "2", "--classes", "3", "--warmup", "1",
                         "--steps", "4", "--resolutions", "8,12", "--write-shape-schedule", "img.json", "--json", "r.json"});
  ASSERT_EQ(o.exit_code, 0) << both(o);
  const nlohmann::json schedule = json("img.json");
  EXPECT_EQ(schedule["kind"], "images");
  for (const auto& step : schedule["steps"]) {
    EXPECT_EQ(step["batch"], 2);
    EXPECT_EQ(step["input"][0], 1);
  }
  EXPECT_EQ(json("r.json")["timed_samples"], 8);
  EXPECT_GT(json("r.json")["us_per_image"].get<double>(), 0.0);
  // Read back without --input: the model takes the file's one channel.
  const Outcome read = run({"--model", "resnet20", "--classes", "3", "--warmup", "1", "--steps", "4", "--shape-schedule",
                            "img.json", "--json", "r2.json"});
  ASSERT_EQ(read.exit_code, 0) << both(read);
  EXPECT_EQ(json("r2.json")["timed_samples"], 8);
}

}  // namespace
}  // namespace sublet
