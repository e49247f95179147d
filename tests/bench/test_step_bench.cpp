// bench/step: the training-step benchmark behind `sublet bench step`, on tiny CPU runs.
#include <gtest/gtest.h>

#include "analysis/replay.h"
#include "bench/step/step_bench.h"
#include "bench/step/step_report.h"
#include "core/errors.h"
#include "memory/registry.h"
#include "scratch_file.h"

namespace sublet {
namespace {

bench::StepBenchOptions tiny(const std::string& model) {
  bench::StepBenchOptions o;
  o.model = model;
  o.input = {1, 8, 8};
  o.batch_size = 4;
  o.num_classes = 3;
  o.steps = 3;
  o.warmup = 1;
  return o;
}

TEST(StepBench, WritesInputShapesAsCxHxW) {
  const bench::InputShape s{1, 28, 30};
  EXPECT_EQ(s.str(), "1x28x30");
}

TEST(StepBench, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(bench::median({5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(bench::median({4, 1, 3, 2}), 2.5);
}

TEST(StepBench, TimesStepsAndReportsPeaksOfTheTimedSteps) {
  const bench::StepBenchResult r = bench::run_step_bench(tiny("resnet20"));
  ASSERT_EQ(r.step_ms.size(), 3u);
  for (double ms : r.step_ms) EXPECT_GT(ms, 0);
  EXPECT_GE(r.ms_per_step, *std::min_element(r.step_ms.begin(), r.step_ms.end()));
  EXPECT_LE(r.ms_per_step, *std::max_element(r.step_ms.begin(), r.step_ms.end()));
  EXPECT_NEAR(r.img_per_s, 4 * 1000.0 / r.ms_per_step, 1e-9);
  // The peak covers at least the ResNet-20 parameters (about 1 MiB of float32) and their gradients.
  EXPECT_GT(r.peak_allocated_bytes, 2u * 270'000u * 4u);
  EXPECT_LE(r.peak_allocated_bytes, r.peak_reserved_bytes);

  const nlohmann::json j = bench::step_json(r);
  for (const char* key : {"model", "device", "batch_size", "input", "ms_per_step", "img_per_s", "peak_allocated_bytes",
                          "peak_reserved_bytes", "steps"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["input"], "1x8x8");
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_TRUE(bench::step_json(std::vector<bench::StepBenchResult>{r, r}).is_array());
  EXPECT_TRUE(bench::step_json(std::vector<bench::StepBenchResult>{r}).is_object());
}

TEST(StepBench, TheBenchmarkLeavesNoTensorBehind) {
  const std::size_t before = memory_allocated(Device::cpu());
  bench::run_step_bench(tiny("resnet20"));
  EXPECT_EQ(memory_allocated(Device::cpu()), before);
}

TEST(StepBench, RecordsTheRunAsAnAllocationTraceThatReplays) {
  sublet::testing::ScratchFile file("");
  bench::StepBenchOptions o = tiny("resnet20");
  o.alloc_trace_path = file.path();
  const bench::StepBenchResult r = bench::run_step_bench(o);
  const std::vector<memory::TraceEvent> trace = memory::load_trace(file.path());
  std::size_t allocs = 0, frees = 0, peak_resets = 0;
  for (const memory::TraceEvent& e : trace) {
    allocs += e.action == memory::TraceEvent::Action::Alloc;
    frees += e.action == memory::TraceEvent::Action::Free;
    peak_resets += e.action == memory::TraceEvent::Action::ResetPeaks;
  }
  EXPECT_GT(allocs, 100u);
  EXPECT_EQ(allocs, frees);  // the run leaves nothing behind, and the trace sees it all go
  EXPECT_GE(peak_resets, 1u);  // the timed steps' peaks start from a reset
  // The replay's peaks count from the trace's last reset, as the run's do.
  const memory::ReplayResult replay = memory::replay_trace(trace, "", std::size_t{1} << 34);
  EXPECT_EQ(replay.peak_allocated, r.peak_allocated_bytes);
  EXPECT_FALSE(replay.out_of_memory);
}

TEST(StepBench, RejectsUnknownModelsAndBadCounts) {
  EXPECT_THROW(bench::run_step_bench(tiny("resnet7")), ValueError);
  auto o = tiny("resnet20");
  o.steps = 0;
  EXPECT_THROW(bench::run_step_bench(o), ValueError);
}

template <class Error>
std::string error_of(const bench::StepBenchOptions& o) {
  try {
    bench::run_step_bench(o);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A GPT step is captured like an image model's (fixed shapes, on a GPU); a shape schedule with a
// CUDA graph stays refused, before any model is built.
TEST(StepBench, GptCudaGraphNeedsAGpuAndFixedShapes) {
  bench::StepBenchOptions o = tiny("gpt-nano");
  o.seq_len = 16;
  o.vocab_size = 64;
  o.cuda_graph = true;
  EXPECT_NE(error_of<DeviceError>(o).find("bench step --cuda-graph: needs --device cuda (CUDA graphs exist only on the "
                                          "GPU), this run is on cpu"),
            std::string::npos)
      << error_of<DeviceError>(o);
  o.schedule = std::make_shared<const data::ShapeSchedule>(data::token_schedule(
      {.seed = 1, .steps = 4, .min_len = 8, .max_len = 16, .tokens_per_batch = 64, .multiple = 8}));
  EXPECT_NE(error_of<ValueError>(o).find("bench step --model gpt-nano --cuda-graph: a CUDA graph replays one step of "
                                         "fixed shapes"),
            std::string::npos)
      << error_of<ValueError>(o);
  // Without the graph the same options train.
  o.cuda_graph = false;
  o.schedule.reset();
  EXPECT_GT(bench::run_step_bench(o).ms_per_step, 0.0);
}

}  // namespace
}  // namespace sublet
