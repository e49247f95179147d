// `sublet replay` of PyTorch memory snapshots, as a user runs it: the real binary on the pickle
// fixtures of tests/data/pickle (plain and gzip), the report's "source", --device, and the clear
// one-line errors for a device out of range, an incomplete history and --device on a sublet trace.
// The sublet-trace report keeps its source as it was.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/cli_process.h"

namespace sublet {
namespace {

namespace fs = std::filesystem;
using cli_test::non_empty_lines;
using cli_test::Outcome;
using cli_test::read_text;
using cli_test::run_sublet;

class ReplaySnapshotCli : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"snapshot.pickle", "snapshot.pickle.gz", "snapshot_overflowed.pickle"})
      fs::copy_file(fs::path(SUBLET_SOURCE_DIR) / "tests/data/pickle" / name, dir_ / name);
  }

  Outcome run(const std::vector<std::string>& args) { return run_sublet(args, {}, dir_); }
  nlohmann::json report() const { return nlohmann::json::parse(read_text(dir_ / "report.json")); }

  // A failed run: exit status 1 and `part` in its one "error: " line.
  void expect_error(const std::vector<std::string>& args, const std::string& part) {
    const Outcome o = run(args);
    ASSERT_TRUE(o.exited) << "killed by signal " << o.signal << ": " << o.err;
    EXPECT_EQ(o.exit_code, 1) << o.out << o.err;
    const auto lines = non_empty_lines(o.err);
    ASSERT_EQ(lines.size(), 1u) << o.err;
    EXPECT_EQ(lines[0].rfind("error: ", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find(part), std::string::npos) << "expected '" << part << "' in: " << lines[0];
  }

  cli_test::ScratchDir scratch_{"sublet-replay-snapshot"};
  const fs::path& dir_ = scratch_.path();
};

TEST_F(ReplaySnapshotCli, ReplaysASnapshotAndReportsItsSource) {
  for (const char* file : {"snapshot.pickle", "snapshot.pickle.gz"}) {
    const Outcome o = run({"replay", file, "--json", "report.json"});
    ASSERT_TRUE(o.exited && o.exit_code == 0) << file << ":\n" << o.out << o.err;
    EXPECT_NE(o.out.find(std::string("PyTorch snapshot ") + file + ": device 0 of 2, 24 trace entries -> 13 events"),
              std::string::npos)
        << o.out;
    EXPECT_NE(o.out.find("as SUBLET_ALLOC_CONF: 'roundup_power2_divisions:4,max_split_size_mb:256'"), std::string::npos) << o.out;
    const nlohmann::json r = report();
    EXPECT_EQ(r["format"], "sublet-replay-report");
    EXPECT_EQ(r["source"], nlohmann::json({{"kind", "pytorch-snapshot"}, {"events", 13}, {"device", 0}}));
    // The recorded run (its own settings), the six standard settings, then the snapshot's own.
    ASSERT_EQ(r["rows"].size(), 8u);
    EXPECT_EQ(r["rows"][0]["label"], "recorded");
    EXPECT_EQ(r["rows"][0]["alloc_conf"], "roundup_power2_divisions:4,max_split_size_mb:256");
    EXPECT_EQ(r["rows"][7]["alloc_conf"], "roundup_power2_divisions:4,max_split_size_mb:256");
    for (const auto& row : r["rows"]) {
      EXPECT_EQ(row["fits"], true);
      EXPECT_GE(row["peak_allocated_bytes"].get<std::int64_t>(), 25 << 20);  // the 25 MiB block
    }
  }
}

TEST_F(ReplaySnapshotCli, DevicePicksATraceAndAllocConfReplacesTheSet) {
  const Outcome o = run({"replay", "snapshot.pickle", "--device", "1", "--alloc-conf", "", "--json", "report.json"});
  ASSERT_TRUE(o.exited && o.exit_code == 0) << o.out << o.err;
  const nlohmann::json r = report();
  EXPECT_EQ(r["source"], nlohmann::json({{"kind", "pytorch-snapshot"}, {"events", 2}, {"device", 1}}));
  ASSERT_EQ(r["rows"].size(), 2u);  // the recorded run, then --alloc-conf's one setting
  EXPECT_EQ(r["rows"][0]["label"], "recorded");
  EXPECT_EQ(r["rows"][1]["peak_allocated_bytes"], 512);  // 100 bytes rounded to the 512-byte granule
}

TEST_F(ReplaySnapshotCli, ClearErrors) {
  expect_error({"replay", "snapshot.pickle", "--device", "2"},
               "snapshot.pickle: device 2 is out of range: the snapshot has device traces for 2 device(s), 0 to 1");
  expect_error({"replay", "snapshot_overflowed.pickle"},
               "snapshot_overflowed.pickle: device 0's history does not start from an empty allocator");
  std::ofstream(dir_ / "trace.json") << R"({"format": "sublet-alloc-trace", "events": []})";
  expect_error({"replay", "trace.json", "--device", "1"},
               "--device 1: picks a device of a PyTorch snapshot, but trace.json is a sublet-alloc-trace");
  {
    std::ofstream gz(dir_ / "text.gz", std::ios::binary);
    const std::string compressed = read_text(fs::path(SUBLET_SOURCE_DIR) / "tests/data/pickle/snapshot.pickle.gz");
    gz << compressed.substr(0, compressed.size() / 2);
  }
  expect_error({"replay", "text.gz"}, "text.gz: the gzip data ends early");
  std::ofstream(dir_ / "list.pickle", std::ios::binary) << std::string("\x80\x02]q\x00.", 6);
  expect_error({"replay", "list.pickle"}, "list.pickle: a pickle of a list, not a PyTorch memory snapshot");
}

TEST_F(ReplaySnapshotCli, SubletTracesKeepTheirReport) {
  std::ofstream(dir_ / "trace.json")
      << R"({"format": "sublet-alloc-trace", "events": [{"action": "alloc", "id": 1, "size": 4096}, {"action": "free", "id": 1}]})";
  const Outcome o = run({"replay", "trace.json", "--json", "report.json"});
  ASSERT_TRUE(o.exited && o.exit_code == 0) << o.out << o.err;
  EXPECT_EQ(o.out.find("PyTorch snapshot"), std::string::npos);
  const nlohmann::json r = report();
  EXPECT_EQ(r["source"], nlohmann::json({{"kind", "sublet-trace"}, {"events", 2}, {"device", nullptr}}));
  EXPECT_EQ(r["rows"].size(), 6u);
}

// A real PyTorch 2.11 run (tests/data/pytorch_snapshots): the first row, "recorded", is that run
// reproduced, byte for byte and call for call against what torch.cuda.memory_stats() reported.
TEST_F(ReplaySnapshotCli, TheRecordedRowReproducesPyTorchsOwnRun) {
  const fs::path data = fs::path(SUBLET_SOURCE_DIR) / "tests/data/pytorch_snapshots";
  const Outcome o = run({"replay", (data / "resnet50_fp32_default.pickle.gz").string(), "--json", "report.json"});
  ASSERT_TRUE(o.exited && o.exit_code == 0) << o.out << o.err;
  const nlohmann::json stats = nlohmann::json::parse(read_text(data / "resnet50_fp32_default.json"))["memory_stats"];
  const nlohmann::json row = report()["rows"][0];
  EXPECT_EQ(row["label"], "recorded");
  EXPECT_EQ(row["peak_reserved_bytes"], stats["reserved_bytes.all.peak"]);
  EXPECT_EQ(row["peak_allocated_bytes"], stats["allocated_bytes.all.peak"]);
  EXPECT_EQ(row["device_allocations"], stats["num_device_alloc"]);
  EXPECT_NE(o.out.find("recorded (default)"), std::string::npos) << o.out;
}

// --rules pytorch: every row under PyTorch 2.11's rules; the recorded row of an
// expandable_segments:True run (which sublet's own rules reproduce only approximately)
// equals its memory_stats() exactly. The default stays sublet's rules.
TEST_F(ReplaySnapshotCli, RulesPytorchReproducesAnExpandableSegmentsRun) {
  const fs::path data = fs::path(SUBLET_SOURCE_DIR) / "tests/data/pytorch_snapshots";
  const std::string snapshot = (data / "resnet18_fp32_expandable.pickle.gz").string();
  const nlohmann::json stats = nlohmann::json::parse(read_text(data / "resnet18_fp32_expandable.json"))["memory_stats"];
  const Outcome o = run({"replay", snapshot, "--rules", "pytorch", "--json", "report.json"});
  ASSERT_TRUE(o.exited && o.exit_code == 0) << o.out << o.err;
  EXPECT_NE(o.out.find("under PyTorch 2.11's allocator rules"), std::string::npos) << o.out;
  const nlohmann::json r = report();
  ASSERT_EQ(r["rows"].size(), 7u);  // recorded, then the six standard settings (the recorded one among them)
  for (const auto& row : r["rows"]) EXPECT_EQ(row["rules"], "pytorch");
  const nlohmann::json& row = r["rows"][0];
  EXPECT_EQ(row["label"], "recorded");
  EXPECT_EQ(row["alloc_conf"], "expandable_segments:True");
  EXPECT_EQ(row["peak_reserved_bytes"], stats["reserved_bytes.all.peak"]);
  EXPECT_EQ(row["peak_allocated_bytes"], stats["allocated_bytes.all.peak"]);
  EXPECT_EQ(row["device_allocations"], stats["num_device_alloc"]);

  const Outcome sublet_rules = run({"replay", snapshot, "--alloc-conf", "", "--json", "report.json"});
  ASSERT_TRUE(sublet_rules.exited && sublet_rules.exit_code == 0) << sublet_rules.out << sublet_rules.err;
  EXPECT_NE(sublet_rules.out.find("under sublet's allocator rules"), std::string::npos) << sublet_rules.out;
  const nlohmann::json sublet_report = report();  // a named copy: a range-for over a temporary's member dangles
  for (const auto& row : sublet_report["rows"]) EXPECT_EQ(row["rules"], "sublet");
  EXPECT_NE(sublet_report["rows"][0]["device_allocations"], stats["num_device_alloc"]);  // 59 vs 39: why --rules pytorch exists

  const Outcome bad = run({"replay", snapshot, "--rules", "tensorflow"});
  ASSERT_TRUE(bad.exited);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE((bad.out + bad.err).find("--rules"), std::string::npos) << bad.out << bad.err;
}

}  // namespace
}  // namespace sublet
