// Smoke runs of `sublet bench alloc` on the CPU and the simulated device, in-process with the
// --quick counts: every allocator runs on every row (tensor rows on the CPU; the simulated device
// has no tensors and skips them), the JSON has every row, and the counters say what each
// allocator is (the cache calls its backend once; malloc is called every time). On the CPU also
// with a torch column from a plugin (test_torch_plugin_loader.cpp has the loader's error paths).
// Plus the pieces with exact answers: batch statistics, the churn sequence, the SVG.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bench/alloc/alloc_bench.h"
#include "bench/alloc/batch_timer.h"
#include "bench/alloc/report_json.h"
#include "bench/alloc/report_svg.h"
#include "bench/alloc/report_table.h"
#include "bench/alloc/tensor_workload.h"
#include "bench/alloc/workloads.h"
#include "core/errors.h"
#include "memory/registry.h"
#include "runtime/tensor.h"
#include "scratch_file.h"

namespace sublet::bench {
namespace {

struct DeviceCase {
  BenchDevice device;
  std::vector<std::string> allocators;
  std::string uncached;  // the allocator that goes to its landlord on every request
  std::optional<std::string> torch_plugin = std::nullopt;  // adds the "torch" column
  std::string name;
};
void PrintTo(const DeviceCase& c, std::ostream* os) { *os << c.name; }

class AllocBenchSmoke : public ::testing::TestWithParam<DeviceCase> {};

void expect_every_cell_ran(const AllocBenchResult& result, const RowResult& row) {
  ASSERT_EQ(row.cells.size(), result.allocators.size()) << row.label;
  for (std::size_t i = 0; i < row.cells.size(); ++i) {
    const CellResult& c = row.cells[i];
    EXPECT_EQ(c.allocator, result.allocators[i].name);
    EXPECT_TRUE(c.ok) << row.label << " / " << c.allocator << ": " << c.error;
    EXPECT_GT(c.pairs_timed, 0u) << row.label << " / " << c.allocator;
    EXPECT_GT(c.batches, 0u);
    EXPECT_GT(c.median_ns, 0.0) << row.label << " / " << c.allocator;
    EXPECT_LE(c.p10_ns, c.median_ns);
    EXPECT_LE(c.median_ns, c.p90_ns);
  }
}

TEST_P(AllocBenchSmoke, EveryAllocatorRunsEveryRowAndTheJsonHasEveryRow) {
  const DeviceCase& param = GetParam();
  AllocBenchOptions options = AllocBenchOptions::quick_options(param.device);
  options.torch_plugin_path = param.torch_plugin;
  const AllocBenchResult result = run_alloc_bench(options);

  std::vector<std::string> names;
  for (const AllocatorInfo& a : result.allocators) names.push_back(a.name);
  EXPECT_EQ(names, param.allocators);
  EXPECT_EQ(result.baseline(), "sublet");

  ASSERT_EQ(result.rows.size(), kPairSizes.size() + kTensorShapes.size() + 2);
  for (std::size_t i = 0; i < kPairSizes.size(); ++i) {
    EXPECT_EQ(result.rows[i].workload, "pair");
    EXPECT_EQ(result.rows[i].size_bytes, kPairSizes[i]);
    expect_every_cell_ran(result, result.rows[i]);
  }
  const bool has_tensors = param.device != BenchDevice::Sim;
  for (std::size_t i = 0; i < kTensorShapes.size(); ++i) {
    const RowResult& row = result.rows[kPairSizes.size() + i];
    EXPECT_EQ(row.workload, "tensor");
    EXPECT_EQ(row.size_bytes, kTensorShapes[i].bytes());
    EXPECT_EQ(row.shape, kTensorShapes[i].sizes());
    if (!has_tensors) {
      EXPECT_TRUE(row.skipped) << row.label;
      EXPECT_TRUE(row.cells.empty());
      continue;
    }
    ASSERT_FALSE(row.skipped) << row.label << ": " << row.skip_reason;
    expect_every_cell_ran(result, row);
    for (const CellResult& c : row.cells) {
      ASSERT_TRUE(c.allocator_pair_ns.has_value()) << row.label << " / " << c.allocator;
      EXPECT_GT(*c.allocator_pair_ns, 0.0) << row.label << " / " << c.allocator;
      EXPECT_DOUBLE_EQ(*c.runtime_overhead_ns(), c.median_ns - *c.allocator_pair_ns);
    }
    // Tensors and pairs of one cell come from one fresh allocator: the cache reaches its backend
    // once, the raw allocator behind the malloc column once per tensor and once per pair.
    EXPECT_EQ(row.cell("sublet")->driver_allocation_calls, 1u) << row.label;
    const CellResult* raw = row.cell("malloc");
    ASSERT_NE(raw, nullptr);
    const auto warmup = (result.options.warmup_pairs + result.options.batch_pairs - 1) / result.options.batch_pairs *
                        result.options.batch_pairs;
    EXPECT_EQ(raw->driver_allocation_calls, 2 * (raw->pairs_timed + warmup)) << row.label;
  }
  if (has_tensors) {
    // Every tensor went back, and the device has its default allocator again.
    EXPECT_EQ(memory_allocated(Device::cpu()), 0u);
    EXPECT_TRUE(memory::allocator_for(Device::cpu()).config().caching);
    EXPECT_EQ(memory::allocator_for(Device::cpu()).config().expandable_segments,
              memory::default_config(Device::cpu()).expandable_segments);
    const Tensor t = Tensor::empty({3, 4});
    EXPECT_EQ(memory_allocated(Device::cpu()), memory::allocator_for(Device::cpu()).round_size(48, {}));
  }
  const RowResult& churn = result.rows[kPairSizes.size() + kTensorShapes.size()];
  EXPECT_EQ(churn.workload, "churn");
  expect_every_cell_ran(result, churn);
  const RowResult& replay = result.rows.back();
  EXPECT_EQ(replay.workload, "replay");
  EXPECT_TRUE(replay.skipped);
  EXPECT_TRUE(replay.cells.empty());

  const GoalCheck goals = check_goals(result);
  EXPECT_EQ(goals.tensor_measured, has_tensors);

  // A cached pair reaches the backend once (the first segment); the uncached one every time.
  for (std::size_t i = 0; i < kPairSizes.size(); ++i) {
    const RowResult& row = result.rows[i];
    EXPECT_EQ(row.cell("sublet")->driver_allocation_calls, 1u) << row.label;
    EXPECT_GE(*row.cell("sublet")->peak_reserved_bytes, row.size_bytes) << row.label;
    const CellResult* raw = row.cell(param.uncached);
    const auto warmup_pairs = (result.options.warmup_pairs + result.options.batch_pairs - 1) /
                              result.options.batch_pairs * result.options.batch_pairs;
    EXPECT_EQ(raw->driver_allocation_calls, raw->pairs_timed + warmup_pairs) << row.label;
  }

  const nlohmann::json doc = report_json(result);
  EXPECT_EQ(doc["device"], bench_device_name(param.device));
  EXPECT_EQ(doc["baseline"], "sublet");
  EXPECT_EQ(doc["settings"]["torch_plugin"], param.torch_plugin ? nlohmann::json(*param.torch_plugin) : nlohmann::json(nullptr));
  ASSERT_EQ(doc["allocators"].size(), param.allocators.size());
  ASSERT_EQ(doc["rows"].size(), result.rows.size());
  std::set<std::string> labels;
  std::size_t tensor_rows = 0;
  for (const nlohmann::json& row : doc["rows"]) {
    labels.insert(row["label"].get<std::string>());
    const bool tensor = row["workload"] == "tensor";
    if (tensor) {
      ++tensor_rows;
      EXPECT_EQ(row["shape"].get<std::vector<std::int64_t>>(), kTensorShapes[tensor_rows - 1].sizes());
      EXPECT_EQ(row["size_bytes"], kTensorShapes[tensor_rows - 1].bytes());
    }
    if (row["skipped"].get<bool>()) {
      EXPECT_TRUE(row["workload"] == "replay" || (tensor && !has_tensors)) << row.dump();
      EXPECT_TRUE(row["results"].empty());
      continue;
    }
    ASSERT_EQ(row["results"].size(), param.allocators.size()) << row["label"];
    for (std::size_t i = 0; i < param.allocators.size(); ++i) {
      const nlohmann::json& cell = row["results"][i];
      EXPECT_EQ(cell["allocator"], param.allocators[i]);
      EXPECT_TRUE(cell["ok"].get<bool>()) << cell.dump();
      EXPECT_GT(cell["median_ns_per_pair"].get<double>(), 0.0);
      EXPECT_GT(cell["ratio_to_baseline"].get<double>(), 0.0);
      EXPECT_EQ(cell["runtime_overhead_ns"].is_number(), tensor) << cell.dump();
      EXPECT_EQ(cell["allocator_pair_ns"].is_number(), tensor) << cell.dump();
    }
    EXPECT_DOUBLE_EQ(row["results"][0]["ratio_to_baseline"].get<double>(), 1.0);
  }
  EXPECT_EQ(tensor_rows, kTensorShapes.size());
  EXPECT_EQ(doc["goals"]["tensor_met"].is_boolean(), has_tensors);
  for (const nlohmann::json& a : doc["allocators"]) EXPECT_EQ(a["tensor_description"].is_string(), has_tensors) << a.dump();
  EXPECT_EQ(labels.size(), result.rows.size()) << "row labels must be distinct";
  // Round trip through text, as the CLI writes it.
  EXPECT_EQ(nlohmann::json::parse(doc.dump(2)), doc);
}

const std::vector<std::string> kCpuAllocators = {"sublet", "sublet-expandable", "malloc"};
const std::vector<std::string> kCpuAllocatorsWithTorch = {"sublet", "sublet-expandable", "malloc", "torch"};

// No plugin: no torch column. The fake plugin (tests/bench/plugins, malloc behind the plugin ABI)
// runs the torch column everywhere; the real one (PyTorch's CPU allocator and at::empty) when
// CMake built it with -DSUBLET_WITH_LIBTORCH=ON.
INSTANTIATE_TEST_SUITE_P(
    Devices, AllocBenchSmoke,
    ::testing::Values(DeviceCase{BenchDevice::Cpu, kCpuAllocators, "malloc", std::nullopt, "cpu"},
                      DeviceCase{BenchDevice::Cpu, kCpuAllocatorsWithTorch, "malloc", SUBLET_TEST_FAKE_TORCH_PLUGIN,
                                 "cpu_with_fake_torch_plugin"},
#ifdef SUBLET_TEST_TORCH_PLUGIN
                      DeviceCase{BenchDevice::Cpu, kCpuAllocatorsWithTorch, "malloc", SUBLET_TEST_TORCH_PLUGIN,
                                 "cpu_with_torch_plugin"},
#endif
                      DeviceCase{BenchDevice::Sim, {"sublet", "sublet-expandable", "simulated-uncached"},
                                 "simulated-uncached", std::nullopt, "sim"}),
    [](const auto& info) { return info.param.name; });

TEST(AllocBench, ReplaysAHistoryOnEveryAllocator) {
  sublet::testing::ScratchFile file(R"({"format": "sublet-alloc-trace", "version": 1, "events": [
      {"action": "alloc", "id": 1, "size": 25690112}, {"action": "alloc", "id": 2, "size": 4096},
      {"action": "alloc", "id": 3, "size": 802816}, {"action": "free", "id": 2},
      {"action": "free", "id": 1}, {"action": "alloc", "id": 4, "size": 9437184}]})");
  AllocBenchOptions options = AllocBenchOptions::quick_options(BenchDevice::Sim);
  options.history_path = file.path();
  const AllocBenchResult result = run_alloc_bench(options);
  const RowResult& replay = result.rows.back();
  ASSERT_FALSE(replay.skipped);
  EXPECT_EQ(replay.peak_live_bytes, 25690112u + 4096u + 802816u);
  expect_every_cell_ran(result, replay);
  for (const CellResult& c : replay.cells) EXPECT_EQ(c.pairs_timed % 4, 0u) << "whole passes of 4 allocs";
}

TEST(AllocBench, ABadHistoryFailsBeforeAnyTiming) {
  sublet::testing::ScratchFile file(R"([{"action": "free", "id": 1}])");
  AllocBenchOptions options = AllocBenchOptions::quick_options(BenchDevice::Cpu);
  options.history_path = file.path();
  EXPECT_THROW(run_alloc_bench(options), IoError);
}

TEST(AllocBench, RejectsZeroRepetitions) {
  AllocBenchOptions options = AllocBenchOptions::quick_options(BenchDevice::Cpu);
  options.repetitions = 0;
  EXPECT_THROW(run_alloc_bench(options), ValueError);
  EXPECT_THROW(parse_bench_device("gpu"), ValueError);
}

TEST(AllocBench, RoundsReportTheMedianOfTheirMedians) {
  AllocBenchOptions options = AllocBenchOptions::quick_options(BenchDevice::Sim);
  options.rounds = 3;
  const AllocBenchResult result = run_alloc_bench(options);
  for (const RowResult& row : result.rows) {
    if (row.skipped) continue;
    for (const CellResult& cell : row.cells) {
      ASSERT_TRUE(cell.ok) << row.label << " " << cell.allocator << ": " << cell.error;
      ASSERT_EQ(cell.round_medians_ns.size(), 3u) << row.label << " " << cell.allocator;
      std::vector<double> sorted = cell.round_medians_ns;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_DOUBLE_EQ(cell.median_ns, sorted[1]) << row.label << " " << cell.allocator;
    }
  }
  options.rounds = 0;
  EXPECT_THROW(run_alloc_bench(options), ValueError);
}

CellResult timed_cell(const std::string& allocator, double ns) {
  CellResult c;
  c.allocator = allocator;
  c.ok = true;
  c.median_ns = ns;
  return c;
}

TEST(AllocBenchGoals, SpeedupIsTheLeastRatioOverTheRowsOfColumnsThatRan) {
  AllocBenchResult result;
  result.options.device = BenchDevice::Cuda;
  result.allocators = {{"sublet", "", ""}, {"torch", "", ""}};  // no cudaMallocAsync column: no goal for it
  RowResult pair;
  pair.workload = "pair";
  pair.label = "pair 512 B";
  pair.cells = {timed_cell("sublet", 50), timed_cell("torch", 500)};
  RowResult churn;
  churn.workload = "churn";
  churn.label = "churn";
  churn.cells = {timed_cell("sublet", 100), timed_cell("torch", 390)};
  RowResult replay;
  replay.workload = "replay";
  replay.label = "replay";
  replay.skipped = true;
  RowResult tensor;  // compares runtimes: reported apart, not part of the allocator goal
  tensor.workload = "tensor";
  tensor.label = "tensor [256] f32";
  tensor.cells = {timed_cell("sublet", 100), timed_cell("torch", 200)};
  result.rows = {pair, tensor, churn, replay};
  GoalCheck g = check_goals(result);
  EXPECT_DOUBLE_EQ(g.speedups[0].lowest_tensor, 2.0);
  EXPECT_EQ(g.speedups[0].lowest_tensor_row, "tensor [256] f32");
  ASSERT_EQ(g.speedups.size(), 1u);
  EXPECT_EQ(g.speedups[0].allocator, "torch");
  EXPECT_DOUBLE_EQ(g.speedups[0].lowest, 3.9);
  EXPECT_EQ(g.speedups[0].lowest_row, "churn");
  EXPECT_FALSE(g.speedups[0].met);  // 4x asked for

  result.rows[2].cells[1].median_ns = 400;
  g = check_goals(result);
  EXPECT_TRUE(g.speedups[0].met);
  result.rows[0].cells[1].ok = false;  // a failed cell shows nothing: not met
  EXPECT_FALSE(check_goals(result).speedups[0].met);
  result.options.device = BenchDevice::Cpu;  // "torch" is c10's uncached CPU allocator there
  EXPECT_TRUE(check_goals(result).speedups.empty());
}

TEST(AllocBench, CudaWithoutADeviceSaysSo) {
  if (memory::cuda_available()) GTEST_SKIP() << "a CUDA device is present: the error path needs a machine without one";
  EXPECT_THROW(allocators_for(BenchDevice::Cuda), DeviceError);
}

TEST(BatchTimer, MedianAndPercentilesOfBatches) {
  const Timing odd = summarise_batches({50, 10, 40, 20, 30}, 500);
  EXPECT_DOUBLE_EQ(odd.median_ns, 30);
  EXPECT_DOUBLE_EQ(odd.p10_ns, 10);
  EXPECT_DOUBLE_EQ(odd.p90_ns, 50);
  EXPECT_EQ(odd.batches, 5u);
  EXPECT_EQ(odd.pairs_timed, 500u);
  EXPECT_DOUBLE_EQ(summarise_batches({4, 1, 3, 2}, 4).median_ns, 2.5);
}

TEST(BatchTimer, StopsAtMaxBatchesAndRunsWarmupFirst) {
  std::vector<std::size_t> seen;
  BatchPlan plan;
  plan.warmup_batches = 2;
  plan.max_batches = 3;
  plan.min_batches = 1;
  plan.max_seconds = 60;
  const Timing t = time_batches([&](std::size_t index) { seen.push_back(index); return std::size_t{10}; }, plan);
  EXPECT_EQ(seen, (std::vector<std::size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(t.batches, 3u);
  EXPECT_EQ(t.pairs_timed, 30u);
}

TEST(Churn, SequenceIsSeededLogUniformAndInBounds) {
  const ChurnSequence a = make_churn_sequence(7, 20000);
  const ChurnSequence b = make_churn_sequence(7, 20000);
  const ChurnSequence c = make_churn_sequence(8, 20000);
  ASSERT_EQ(a.initial_sizes.size(), kChurnLiveBlocks);
  ASSERT_EQ(a.steps.size(), 20000u);
  EXPECT_EQ(a.initial_sizes, b.initial_sizes);
  std::size_t same_as_other_seed = 0, below_64k = 0;
  for (std::size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].size, b.steps[i].size);
    EXPECT_EQ(a.steps[i].slot, b.steps[i].slot);
    ASSERT_GE(a.steps[i].size, kChurnMinSize);
    ASSERT_LE(a.steps[i].size, kChurnMaxSize);
    ASSERT_LT(a.steps[i].slot, kChurnLiveBlocks);
    same_as_other_seed += a.steps[i].size == c.steps[i].size;
    below_64k += a.steps[i].size < 64 * 1024;
  }
  EXPECT_LT(same_as_other_seed, 100u);
  // Log-uniform over 2^9..2^24: sizes below 2^16 are 7 of the 15 octaves, about 46.7%.
  EXPECT_NEAR(static_cast<double>(below_64k) / 20000.0, 7.0 / 15.0, 0.02);
  EXPECT_GE(a.peak_live_bytes, kChurnLiveBlocks * kChurnMinSize);
}

TEST(AllocBenchSvg, OnePolylinePerAllocatorWithLegendAndAxes) {
  const AllocBenchResult result = run_alloc_bench(AllocBenchOptions::quick_options(BenchDevice::Sim));
  const std::string svg = report_svg(result);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  std::size_t polylines = 0;
  for (std::size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++polylines;
  EXPECT_EQ(polylines, result.allocators.size());
  for (const AllocatorInfo& a : result.allocators) EXPECT_NE(svg.find(">" + a.name + "<"), std::string::npos) << a.name;
  EXPECT_NE(svg.find("request size (log scale)"), std::string::npos);
  EXPECT_NE(svg.find("ns per pair (log scale)"), std::string::npos);
  EXPECT_NE(svg.find(">256 MiB<"), std::string::npos);
  EXPECT_NE(svg.find(">4 KiB<"), std::string::npos);
  EXPECT_NE(svg.find("tensor skipped"), std::string::npos) << "the simulated device has no tensors";
}

TEST(AllocBenchSvg, TensorRowsAreSquaresInTheirAllocatorsColour) {
  const AllocBenchResult result = run_alloc_bench(AllocBenchOptions::quick_options(BenchDevice::Cpu));
  const std::string svg = report_svg(result);
  std::size_t squares = 0;
  for (std::size_t at = svg.find("<rect x="); at != std::string::npos; at = svg.find("<rect x=", at + 1))
    squares += svg.compare(svg.find('>', at) + 1, 7, "<title>") == 0;
  EXPECT_EQ(squares, kTensorShapes.size() * result.allocators.size());
  EXPECT_NE(svg.find("<title>sublet tensor [256] f32: "), std::string::npos);
  EXPECT_NE(svg.find(">tensor "), std::string::npos);
}

TEST(TensorShape, BytesSizesAndText) {
  EXPECT_EQ(kTensorShapes[0].bytes(), 1024u);
  EXPECT_EQ(kTensorShapes[0].str(), "[256]");
  EXPECT_EQ(kTensorShapes[1].bytes(), 4u << 20);
  EXPECT_EQ(kTensorShapes[1].sizes(), (std::vector<std::int64_t>{1024, 1024}));
  EXPECT_EQ(kTensorShapes[1].str(), "[1024, 1024]");
}

}  // namespace
}  // namespace sublet::bench
