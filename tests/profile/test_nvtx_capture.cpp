// `sublet bench step --nvtx` seen by a tool: the real binary runs as a child process with NVTX's
// injection variable naming libsublet_nvtx_capture.so (the way Nsight Systems attaches), and the
// ranges it recorded are checked against the model's modules: a forward and a backward range per
// module per step, every range ended, forward ranges nested in their parent's, backward after
// forward. Without --nvtx the library is never even loaded. CPU only: NVTX ranges are host-side.
#include <gtest/gtest.h>

#include <stdio.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "models/registry.h"
#include "runtime/factories.h"
#include "runtime/nn/module.h"
#include "tests/cli/cli_process.h"

namespace sublet {
namespace {

namespace fs = std::filesystem;
using cli_test::Outcome;
using cli_test::read_text;
using cli_test::run_sublet;

constexpr int kWarmup = 1, kSteps = 2, kAllSteps = kWarmup + kSteps;

struct Range {
  std::string name;
  std::int64_t start_ns = 0, end_ns = -1;  // -1: never ended
};

Outcome run_bench_step(const fs::path& dir, bool nvtx) {
  std::vector<std::string> args{"bench", "step", "--device", "cpu", "--model", "resnet20", "--steps",
                                std::to_string(kSteps), "--warmup", std::to_string(kWarmup),
                                "--batch-size", "4", "--input", "3x16x16"};
  if (nvtx) args.push_back("--nvtx");
  return run_sublet(args, {{"NVTX_INJECTION64_PATH", SUBLET_NVTX_CAPTURE_LIBRARY},
                           {"SUBLET_NVTX_CAPTURE", (dir / "ranges.json").string()}}, dir);
}

// How often each module's forward runs in one step, named as module_ranges names them ("model",
// "model.conv1", ...): counted here with forward hooks on the model bench step builds, since not
// every registered module runs (the blocks' relu modules are fused into batch norm's kernels).
std::map<std::string, int> module_calls_per_step() {
  auto model = models::create_model("resnet20");
  std::map<std::string, int> calls;
  for (const auto& [path, module] : model->named_modules()) {
    const std::string name = path.empty() ? "model" : "model." + path;
    module->register_forward_pre_hook([&calls, name](nn::Module&, const Tensor&) { ++calls[name]; });
  }
  Generator generator(1);
  (*model)(randn({2, 3, 16, 16}, generator));
  return calls;
}

class NvtxCapture : public ::testing::Test {
 protected:
  // One run of the binary for every test here (a few seconds each on two shared cores).
  static void SetUpTestSuite() {
    scratch_ = new cli_test::ScratchDir("sublet-nvtx-capture");
    outcome_ = new Outcome(run_bench_step(scratch_->path(), /*nvtx=*/true));
    const fs::path file = scratch_->path() / "ranges.json";
    if (!fs::exists(file)) return;
    capture_ = new nlohmann::json(nlohmann::json::parse(read_text(file)));
  }
  static void TearDownTestSuite() {
    delete capture_;
    delete outcome_;
    delete scratch_;
  }
  void SetUp() override {
    ASSERT_TRUE(outcome_->exited && outcome_->exit_code == 0) << outcome_->out << outcome_->err;
    ASSERT_NE(capture_, nullptr) << "no ranges.json written; stderr: " << outcome_->err;
    for (const auto& r : (*capture_)["ranges"])
      ranges_.push_back({r["name"].get<std::string>(), r["start_ns"].get<std::int64_t>(),
                         r["end_ns"].is_null() ? -1 : r["end_ns"].get<std::int64_t>()});
    std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) { return a.start_ns < b.start_ns; });
  }
  // The ranges of each step: from one "model forward" start to the next.
  std::vector<std::vector<Range>> steps() const {
    std::vector<std::vector<Range>> out;
    for (const Range& r : ranges_) {
      if (r.name == "model forward") out.emplace_back();
      if (!out.empty()) out.back().push_back(r);
    }
    return out;
  }

  static cli_test::ScratchDir* scratch_;
  static Outcome* outcome_;
  static nlohmann::json* capture_;
  std::vector<Range> ranges_;
};
cli_test::ScratchDir* NvtxCapture::scratch_ = nullptr;
Outcome* NvtxCapture::outcome_ = nullptr;
nlohmann::json* NvtxCapture::capture_ = nullptr;

TEST_F(NvtxCapture, EveryModuleThatRunsHasAForwardAndABackwardRangeInEveryStep) {
  EXPECT_EQ((*capture_)["format"], "sublet-nvtx-capture");
  const std::map<std::string, int> calls = module_calls_per_step();
  ASSERT_GT(calls.size(), 40u);  // resnet20: stem, 9 blocks of 5 or 6 modules that run, pool, flatten, fc
  std::map<std::string, int> expected;
  for (const auto& [module, n] : calls) expected[module + " forward"] = expected[module + " backward"] = n;
  ASSERT_TRUE(expected.contains("model.layer1.0.conv1 forward"));
  ASSERT_TRUE(expected.contains("model.layer3.2.bn2 backward"));

  const auto all_steps = steps();
  ASSERT_EQ(all_steps.size(), static_cast<std::size_t>(kAllSteps)) << "warm-up and timed steps each start one";
  for (std::size_t s = 0; s < all_steps.size(); ++s) {
    std::map<std::string, int> count;
    for (const Range& r : all_steps[s]) ++count[r.name];
    EXPECT_EQ(count, expected) << "step " << s;
  }
}

TEST_F(NvtxCapture, EveryRangeEndsAfterItStarts) {
  std::size_t per_step = 0;
  for (const auto& [module, n] : module_calls_per_step()) per_step += 2 * static_cast<std::size_t>(n);
  ASSERT_EQ(ranges_.size(), kAllSteps * per_step);
  for (const Range& r : ranges_) EXPECT_GE(r.end_ns, r.start_ns) << r.name << (r.end_ns < 0 ? " never ended" : "");
  EXPECT_EQ((*capture_)["unmatched_ends"], 0);
}

TEST_F(NvtxCapture, BackwardRangesStartAfterTheForwardAndForwardRangesNestInTheirParents) {
  ASSERT_EQ(steps().size(), static_cast<std::size_t>(kAllSteps));
  for (const auto& step : steps()) {
    std::map<std::string, Range> forward;
    for (const Range& r : step)
      if (r.name.ends_with(" forward")) forward[r.name.substr(0, r.name.size() - 8)] = r;
    const Range& model = forward.at("model");
    for (const Range& r : step) {
      if (r.name.ends_with(" backward")) {
        EXPECT_GE(r.start_ns, model.end_ns) << r.name << " starts before the step's forward ended";
        continue;
      }
      const std::string module = r.name.substr(0, r.name.size() - 8);
      if (module == "model") continue;
      const Range& parent = forward.at(module.substr(0, module.rfind('.')));
      EXPECT_TRUE(parent.start_ns <= r.start_ns && r.end_ns <= parent.end_ns) << r.name << " outside its parent";
    }
  }
}

// nvtx_sum.py: the nsys-like table over the timed steps only.
TEST_F(NvtxCapture, TheSummaryCountsTheTimedStepsOfEachRange) {
#ifndef SUBLET_PYTHON3
  GTEST_SKIP() << "no python3: would check nvtx_sum.py's table";
#else
  const std::string command = std::string(SUBLET_PYTHON3) + " " + SUBLET_SOURCE_DIR +
                              "/profile/nvtx_capture/nvtx_sum.py " + (scratch_->path() / "ranges.json").string() +
                              " --skip-steps " + std::to_string(kWarmup) + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string text;
  for (char buffer[4096]; ::fgets(buffer, sizeof buffer, pipe) != nullptr;) text += buffer;
  ASSERT_EQ(::pclose(pipe), 0) << text;
  bool found = false;
  for (const std::string& line : cli_test::non_empty_lines(text)) {
    if (!line.ends_with("  model.layer1.0.conv1 forward")) continue;
    found = true;
    // Columns: Time (%), Total, Instances, ...: the timed steps' instances only.
    std::istringstream in(line);
    std::string percent, total, instances;
    in >> percent >> total >> instances;
    EXPECT_EQ(instances, std::to_string(kSteps)) << line;
    EXPECT_GT(std::stod(total), 0.0) << line;
  }
  EXPECT_TRUE(found) << text;
  EXPECT_NE(text.find("0 never ended"), std::string::npos) << text;
#endif
}

TEST(NvtxCaptureWithoutFlag, NoRangesAndNoCaptureFile) {
  cli_test::ScratchDir scratch("sublet-nvtx-capture-off");
  const Outcome o = run_bench_step(scratch.path(), /*nvtx=*/false);
  ASSERT_TRUE(o.exited && o.exit_code == 0) << o.out << o.err;
  // NVTX loads the injection library at the program's first NVTX call; without --nvtx there is none.
  EXPECT_FALSE(fs::exists(scratch.path() / "ranges.json")) << read_text(scratch.path() / "ranges.json");
}

}  // namespace
}  // namespace sublet
