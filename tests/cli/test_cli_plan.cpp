// `sublet plan` as a user runs it: on a captured step's trace (bench/data) the JSON's
// lower bound, arena and every heuristic's figure; with --recompute, rows for budgets from 90% to
// 30% of a bench step's measured peak (the cheapest fit, or the smallest peak reachable) and the
// SVG curve; a snapshot pickle is read like a trace.
#include <gtest/gtest.h>

#include <set>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_process.h"

namespace sublet {
namespace {

namespace fs = std::filesystem;
using cli_test::Outcome;
using cli_test::read_text;
using cli_test::run_sublet;

// What `sublet bench step --memory-budget ... --json` writes, reduced to what plan reads: two
// stages of two blocks each, 100 MiB of peak with nothing recomputed.
const char* kBenchJson = R"({"model": "resnet20", "batch_size": 64, "memory_budget": {
  "baseline_peak_bytes": 104857600, "forward_ms": 10.0, "units": [
    {"name": "stem", "group": 0, "retained_bytes": 20971520, "output_bytes": 4194304, "forward_ms": 1.0},
    {"name": "layer1.0", "group": 1, "retained_bytes": 20971520, "output_bytes": 4194304, "forward_ms": 2.0},
    {"name": "layer1.1", "group": 1, "retained_bytes": 20971520, "output_bytes": 4194304, "forward_ms": 3.0},
    {"name": "layer2.0", "group": 2, "retained_bytes": 10485760, "output_bytes": 2097152, "forward_ms": 2.0}]}})";

class PlanCli : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(dir_ / "bench.json") << kBenchJson; }
  Outcome run(const std::vector<std::string>& args) { return run_sublet(args, {}, dir_); }
  cli_test::ScratchDir scratch_{"sublet-plan-cli"};
  const fs::path& dir_ = scratch_.path();
};

TEST_F(PlanCli, ACapturedStepPlansWithinOnePercentAndListsEveryHeuristic) {
  const std::string trace = std::string(SUBLET_SOURCE_DIR) + "/bench/data/resnet18_bs512_captured_step.plan_trace.json";
  const Outcome o = run({"plan", trace, "--json", "plan.json"});
  ASSERT_TRUE(o.exited && o.exit_code == 0) << o.out << o.err;
  const auto doc = nlohmann::json::parse(read_text(dir_ / "plan.json"));
  EXPECT_EQ(doc["format"], "sublet-plan-report");
  EXPECT_EQ(doc["source"]["kind"], "sublet-trace");
  const double bound = doc["lower_bound_bytes"].get<double>(), arena = doc["planned_arena_bytes"].get<double>();
  EXPECT_GE(arena, bound);
  EXPECT_LE(arena, 1.01 * bound);
  EXPECT_GE(doc["heuristics"].size(), 5u);
  // What the allocators reserve: sublet's rules and PyTorch's, with fixed and expandable segments,
  // never below the lower bound.
  ASSERT_EQ(doc["rows"].size(), 4u);
  std::set<std::string> rules;
  for (const auto& row : doc["rows"]) {
    rules.insert(row["rules"].get<std::string>());
    EXPECT_GE(row["peak_reserved_bytes"].get<double>(), bound) << row;
  }
  EXPECT_EQ(rules, (std::set<std::string>{"sublet", "pytorch"}));
  EXPECT_NE(o.out.find("PyTorch rules, expandable_segments:True"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("iterated greedy by size"), std::string::npos) << o.out;
}

TEST_F(PlanCli, RecomputeRowsForBudgetsAndTheirCurve) {
  const Outcome o = run({"plan", "--recompute", "bench.json", "--json", "plan.json", "--svg", "curve.svg"});
  ASSERT_TRUE(o.exited && o.exit_code == 0) << o.out << o.err;
  const auto rows = nlohmann::json::parse(read_text(dir_ / "plan.json"))["recompute_rows"];
  ASSERT_EQ(rows.size(), 7u);
  EXPECT_DOUBLE_EQ(rows[0]["budget_fraction"].get<double>(), 0.9);
  for (const auto& row : rows) {
    if (row["fits"].get<bool>()) EXPECT_LE(row["predicted_peak_bytes"].get<double>(), row["budget_bytes"].get<double>()) << row;
    else EXPECT_GT(row["predicted_peak_bytes"].get<double>(), row["budget_bytes"].get<double>()) << row;
  }
  EXPECT_TRUE(rows[0]["fits"].get<bool>());
  EXPECT_FALSE(rows[6]["fits"].get<bool>()) << "30% of the peak is below what recomputing these blocks reaches";
  const std::string svg = read_text(dir_ / "curve.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("recomputation under a memory budget"), std::string::npos);
}

TEST_F(PlanCli, ABenchJsonWithoutMeasuredBlocksIsRefused) {
  std::ofstream(dir_ / "plain.json") << R"({"model": "resnet20", "ms_per_step": 1.0})";
  const Outcome o = run({"plan", "--recompute", "plain.json"});
  ASSERT_TRUE(o.exited);
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.err.find("expected the JSON of `sublet bench step --memory-budget ... --json`"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace sublet
