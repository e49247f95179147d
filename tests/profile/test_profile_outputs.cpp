// Every file `sublet profile` writes, from a profiled ResNet-20 on the CPU: trace.json has the
// trace-event shapes Perfetto reads, snapshot.pickle loads with Python's pickle into memory_viz's
// keys, the SVGs (the segment map over the run too) are well-formed XML, and the allocation trace replays to the live run's peak.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "analysis/replay.h"
#include "core/format_bytes.h"
#include "models/registry.h"
#include "profile/history_replay.h"
#include "profile/layer_rows.h"
#include "profile/profile_report.h"
#include "profile_test_util.h"

namespace sublet::profile {
namespace {

struct Profiled {
  ProfileRun run;
  ProfileReport report;
  std::filesystem::path dir;
};

const Profiled& profiled() {
  static const Profiled p = [] {
    ProfileOptions o;
    o.model_name = "resnet20";
    o.batch_size = 4;
    o.input_shape = {3, 16, 16};
    o.steps = 2;
    o.timing_steps = 1;
    Profiled out;
    out.run = profile_training([] { return models::create_model("resnet20", {.num_classes = 10, .seed = 1}); }, o);
    out.dir = testing::fresh_directory("outputs");
    out.report = write_profile(out.run, out.dir.string());
    return out;
  }();
  return p;
}

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(ProfileOutputs, EveryFileIsWritten) {
  const Profiled& p = profiled();
  for (const char* name : {"layers.csv", "layers.json", "trace.json", "snapshot.pickle", "memory.svg", "memory.html", "layers.svg",
                           "segments.svg", "segment_map.svg", "summary.txt", "alloc_trace.json", "step_diff.txt"}) {
    EXPECT_TRUE(std::filesystem::exists(p.dir / name)) << name;
    EXPECT_GT(std::filesystem::file_size(p.dir / name), 100u) << name;
  }
}

TEST(ProfileOutputs, LayersCsvAndJsonHoldOneRowPerSpan) {
  const Profiled& p = profiled();
  const std::string csv = read(p.dir / "layers.csv");
  EXPECT_EQ(static_cast<std::size_t>(std::count(csv.begin(), csv.end(), '\n')), p.run.spans.size() + 1);
  EXPECT_EQ(csv.rfind("step,module,type,phase,", 0), 0u);
  const auto doc = nlohmann::json::parse(read(p.dir / "layers.json"));
  ASSERT_EQ(doc["rows"].size(), p.run.spans.size());
  ASSERT_EQ(doc["steps"].size(), 2u);
  EXPECT_EQ(doc["steps"][1]["peak_allocated"].get<std::int64_t>(), static_cast<std::int64_t>(p.run.steps[1].live_peak_allocated));
  for (const auto& row : doc["rows"]) {
    EXPECT_TRUE(row["phase"] == "fwd" || row["phase"] == "bwd" || row["phase"] == "optimizer");
    EXPECT_EQ(row["allocated_by_category"].size(), kNumCategories);
  }
  // The terminal table names the model's layers.
  EXPECT_NE(p.report.table.find("layer2.1.conv1"), std::string::npos);
}

TEST(ProfileOutputs, TraceJsonHasCompleteEventsCountersAndInstants) {
  const Profiled& p = profiled();
  const auto doc = nlohmann::json::parse(read(p.dir / "trace.json"));
  ASSERT_TRUE(doc.contains("traceEvents"));
  std::size_t complete = 0, counters = 0, instants = 0, segment_allocs = 0;
  std::set<std::string> counter_names;
  for (const auto& e : doc["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid"));
    const std::string ph = e["ph"];
    if (ph == "M") continue;
    ASSERT_TRUE(e["ts"].is_number());
    if (ph == "X") {
      ++complete;
      ASSERT_TRUE(e["dur"].is_number());
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      ASSERT_TRUE(e["name"].is_string());
      ASSERT_TRUE(e["tid"].is_number_integer());
    } else if (ph == "C") {
      ++counters;
      counter_names.insert(e["name"].get<std::string>());
      ASSERT_TRUE(e["args"].is_object());
      for (const auto& [key, value] : e["args"].items()) ASSERT_TRUE(value.is_number()) << key;
    } else if (ph == "i") {
      ++instants;
      ASSERT_TRUE(e["s"] == "g" || e["s"] == "t" || e["s"] == "p");
      // A new segment, or more pages of an expandable one (sublet's default).
      const std::string name = e["name"].get<std::string>();
      if (name.rfind("segment_alloc", 0) == 0 || name.rfind("segment_map", 0) == 0) ++segment_allocs;
    } else {
      FAIL() << "unexpected phase " << ph;
    }
  }
  EXPECT_EQ(complete, p.run.spans.size() + p.run.steps.size());
  EXPECT_GT(counters, 100u);
  EXPECT_EQ(counter_names, (std::set<std::string>{"memory (MiB)", "allocated by category (MiB)"}));
  EXPECT_EQ(segment_allocs, static_cast<std::size_t>(std::count_if(p.run.events.begin(), p.run.events.end(), [](const auto& e) {
              return e.kind == memory::AllocatorEventKind::SegmentAlloc || e.kind == memory::AllocatorEventKind::SegmentMap;
            })));
  EXPECT_GE(instants, segment_allocs);
  EXPECT_GT(segment_allocs, 0u);
}

TEST(ProfileOutputs, SnapshotPickleLoadsWithPythonIntoMemoryVizKeys) {
  const Profiled& p = profiled();
  int status = 0;
  const std::string out = testing::run_python(
      "import pickle,sys\n"
      "d = pickle.load(open(sys.argv[1], \"rb\"))\n"
      "print(sorted(d))\n"
      "seg_keys = {\"device\",\"address\",\"total_size\",\"allocated_size\",\"active_size\",\"requested_size\",\"stream\","
      "\"segment_type\",\"segment_pool_id\",\"is_expandable\",\"frames\",\"blocks\"}\n"
      "assert all(set(s) == seg_keys for s in d[\"segments\"]), \"segment keys\"\n"
      "assert all(s[\"total_size\"] == sum(b[\"size\"] for b in s[\"blocks\"]) for s in d[\"segments\"]), \"block sizes\"\n"
      "blocks = [b for s in d[\"segments\"] for b in s[\"blocks\"]]\n"
      "assert all(set(b) == {\"address\",\"size\",\"requested_size\",\"state\",\"frames\"} for b in blocks)\n"
      "assert {b[\"state\"] for b in blocks} <= {\"active_allocated\",\"active_awaiting_free\",\"inactive\"}\n"
      "frames = [f for b in blocks for f in b[\"frames\"]]\n"
      "assert all(set(f) == {\"filename\",\"line\",\"name\"} for f in frames)\n"
      "t = d[\"device_traces\"]\n"
      "assert len(t) == 1\n"
      "assert all({\"action\",\"addr\",\"size\",\"stream\",\"time_us\",\"frames\"} <= set(e) for e in t[0])\n"
      "print(len(d[\"segments\"]), len(t[0]), sorted({e[\"action\"] for e in t[0]}))\n"
      "print(sorted({f[\"name\"] for b in blocks for f in b[\"frames\"]}))\n"
      "print(sum(s[\"allocated_size\"] for s in d[\"segments\"]), sum(s[\"total_size\"] for s in d[\"segments\"]))\n"
      "print(\"optimizer\" in str(d[\"allocator_settings\"]) or d[\"allocator_settings\"][\"max_split_size\"])\n",
      (p.dir / "snapshot.pickle").string(), &status);
  ASSERT_EQ(status, 0) << out;
  std::size_t allocated = 0, reserved = 0;
  for (const auto& s : p.run.final_segments) {
    allocated += s.allocated_size;
    reserved += s.total_size;
  }
  // New memory comes as segments, or as pages mapped onto an expandable segment (sublet's default).
  const std::string new_memory =
      p.run.allocator_config.find("expandable_segments:True") != std::string::npos ? "segment_map" : "segment_alloc";
  // The markers of empty_cache() and peak resets have no action in PyTorch's trace: left out.
  const auto traced = std::count_if(p.run.events.begin(), p.run.events.end(), [](const memory::HistoryEvent& e) {
    return e.kind != memory::AllocatorEventKind::CacheEmptied && e.kind != memory::AllocatorEventKind::PeaksReset;
  });
  const std::string expected =
      "['allocator_settings', 'device_traces', 'segments']\n" + std::to_string(p.run.final_segments.size()) + " " +
      std::to_string(traced) + " ['alloc', 'free_completed', 'free_requested', '" + new_memory + "']\n" +
      // input: the profile's own copy of the batch, made once with the model (each step copies it)
      "['gradient', 'input', 'optimizer_state', 'parameter']\n" + std::to_string(allocated) + " " + std::to_string(reserved) + "\n-1\n";
  EXPECT_EQ(out, expected);
}

TEST(ProfileOutputs, SvgsAreWellFormedXml) {
  const Profiled& p = profiled();
  for (const char* name : {"memory.svg", "layers.svg", "segments.svg", "segment_map.svg"}) {
    int status = 0;
    const std::string out = testing::run_python(
        "import sys, xml.etree.ElementTree as ET\n"
        "root = ET.parse(sys.argv[1]).getroot()\n"
        "ns = \"{http://www.w3.org/2000/svg}\"\n"
        "print(root.tag == ns + \"svg\", len(root.findall(ns + \"rect\")) > 5, len(root.findall(ns + \"text\")) > 5)\n",
        (p.dir / name).string(), &status);
    EXPECT_EQ(status, 0) << name << ": " << out;
    EXPECT_EQ(out, "True True True\n") << name;
  }
  const std::string html = read(p.dir / "memory.html");
  EXPECT_EQ(std::count(html.begin(), html.end(), '<') > 100, true);
  std::size_t svgs = 0;
  for (std::size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++svgs;
  EXPECT_EQ(svgs, 4u);
}

TEST(ProfileOutputs, AllocationTraceReplaysToTheLivePeakReserved) {
  const Profiled& p = profiled();
  std::size_t live_peak_reserved = 0;
  for (const auto& s : p.run.steps) live_peak_reserved = std::max(live_peak_reserved, s.live_peak_reserved);
  ASSERT_GT(live_peak_reserved, 0u);
  // The CPU run used the HostBackend; the replay runs on the SimulatedBackend with the default
  // settings. The segment rules are the same, so the peaks must be equal to the byte.
  const auto trace = memory::load_trace((p.dir / "alloc_trace.json").string());
  const memory::ReplayResult replay = memory::replay_trace(trace, "", std::size_t{64} << 30);
  EXPECT_FALSE(replay.out_of_memory);
  EXPECT_EQ(replay.peak_reserved, live_peak_reserved);
  std::size_t live_peak_allocated = 0;
  for (const auto& s : p.run.steps) live_peak_allocated = std::max(live_peak_allocated, s.live_peak_allocated);
  EXPECT_EQ(replay.peak_allocated, live_peak_allocated);
}

TEST(ProfileOutputs, ReplayedStateAtTheEndHasTheLiveSegmentsAndBlocks) {
  const Profiled& p = profiled();
  const ReplayedState end = replay_through(p.run, p.run.events.size() - 1);
  const auto layout = [](const std::vector<memory::SegmentInfo>& segments) {
    std::vector<std::vector<std::pair<std::size_t, bool>>> out;  // per segment: (block size, allocated)
    for (const auto& s : segments) {
      out.emplace_back();
      for (const auto& b : s.blocks) out.back().push_back({b.size, b.state != memory::BlockInfo::State::Inactive});
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(layout(end.segments), layout(p.run.final_segments));
  EXPECT_EQ(end.reserved, p.run.steps.back().reserved_at_end);
  // Its waste split adds up to the replayed reserved memory, now and at the reserved peak.
  EXPECT_EQ(end.waste.reserved, end.reserved);
  EXPECT_EQ(end.waste.requested + end.waste.wasted(), end.reserved);
  EXPECT_EQ(end.waste_at_reserved_peak.reserved, end.peak_reserved);
  EXPECT_EQ(end.waste_at_reserved_peak.requested + end.waste_at_reserved_peak.wasted(), end.peak_reserved);
}

TEST(ProfileOutputs, SummaryExplainsPeakEstimateFragmentationAndTheStepDiff) {
  const Profiled& p = profiled();
  const std::string summary = read(p.dir / "summary.txt");
  for (const char* part : {"Step peaks", "adds up per layer", "Static estimate vs measured", "parameters (", "rounding:",
                           "caching:", "Fragmentation", "Step 2 against step 1", "Overhead of profiling",
                           "Reserved memory by use", "holes (free blocks in segments with live ones)",
                           "memory_summary() at step 2's peak", "memory_summary() at the end", "Allocated memory"})
    EXPECT_NE(summary.find(part), std::string::npos) << part;
  // ResNet-20 has 0.27 M parameters: about 1.04 MiB of float32 weights.
  EXPECT_NE(summary.find(sublet::format_bytes(static_cast<std::int64_t>(p.run.parameter_bytes))), std::string::npos);
}

}  // namespace
}  // namespace sublet::profile
