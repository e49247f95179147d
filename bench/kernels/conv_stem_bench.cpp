// GPU benchmark of ResNet-50's stem convolution with its input channels unpadded and zero-padded
// (ops/cuda/conv2d_channel_pad.h, TuningOptions::conv_pad_channels): input [N, 3, 224, 224]
// channels-last, weight [64, 3, 7, 7], stride 2, padding 3, output [N, 64, 112, 112]. For
// bfloat16 and float16, batch 256 and 64, cuDNN benchmarking off (heuristics) and on (engines
// timed once per shape, as torch.backends.cudnn.benchmark), it times the forward, the weight
// gradient and the input gradient with padding off, to 4 and to 8 channels. The three settings
// alternate within each round, so a slow phase of the host hits them alike; a figure is the
// median over the rounds of the mean of kRepeats calls (CUDA events), the padded runs' widening
// and narrowing kernels included. The widening of the input alone is timed too. TFLOP/s count the
// unpadded convolution's work (2 N OH OW K R S C with C = 3), so the columns compare directly.
// Prints a table; writes JSON (machine, commit, date, command, rows) to --json FILE.
//   conv_stem_bench [--json FILE] [--rounds N] [--quick]
// --quick: bfloat16, batch 64, one round (a smoke run). Built as build/bench/kernels/conv_stem_bench.
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "conv_stem_bench_revision.h"
#include "core/dtype.h"
#include "core/tuning.h"
#include "memory/caching_allocator.h"
#include "memory/cuda_check.h"
#include "memory/registry.h"
#include "ops/context.h"
#include "ops/conv2d.h"
#include "ops/conv_settings.h"
#include "ops/copy.h"
#include "ops/cuda/conv2d_channel_pad.h"

namespace {

using namespace sublet;

constexpr int kWarmup = 3;
constexpr int kRepeats = 20;
constexpr int kPaddings[] = {kConvPadChannelsOff, 4, 8};
constexpr const char* kPasses[] = {"forward", "weight gradient", "input gradient"};

// Device memory from the caching allocator, freed at the end of its scope.
memory::ScopedBlock device_block(const ops::Context& ctx, std::size_t bytes) {
  return memory::ScopedBlock(*ctx.allocator, bytes, ctx.stream);
}

// `count` values of `dtype`, uniform in [-1, 1).
memory::ScopedBlock random_buffer(const ops::Context& ctx, DType dtype, std::int64_t count, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> host(static_cast<std::size_t>(count));
  for (float& v : host) v = dist(gen);
  const memory::ScopedBlock staging = device_block(ctx, host.size() * sizeof(float));
  SUBLET_CUDA_CHECK(cudaMemcpy(staging.get(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  memory::ScopedBlock out = device_block(ctx, static_cast<std::size_t>(count) * element_size(dtype));
  ops::copy(ctx, {count}, dtype, ops::StridedRef{out.get(), {1}}, DType::Float32,
            ops::ConstStridedRef{staging.get(), {1}});
  SUBLET_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(ctx.stream)));
  return out;
}

// Mean milliseconds per call over kRepeats calls after kWarmup, by CUDA events.
double time_ms(const ops::Context& ctx, const std::function<void()>& launch) {
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  for (int i = 0; i < kWarmup; ++i) launch();
  cudaEvent_t start = nullptr, stop = nullptr;
  SUBLET_CUDA_CHECK(cudaEventCreate(&start));
  SUBLET_CUDA_CHECK(cudaEventCreate(&stop));
  SUBLET_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < kRepeats; ++i) launch();
  SUBLET_CUDA_CHECK(cudaEventRecord(stop, stream));
  SUBLET_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  SUBLET_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  SUBLET_CUDA_CHECK(cudaEventDestroy(start));
  SUBLET_CUDA_CHECK(cudaEventDestroy(stop));
  return static_cast<double>(ms) / kRepeats;
}

ops::Conv2dShape stem(std::int64_t batch) {
  ops::Conv2dShape s;
  s.batch = batch, s.in_channels = 3, s.in_height = s.in_width = 224;
  s.out_channels = 64, s.kernel_h = s.kernel_w = 7, s.stride_h = s.stride_w = 2, s.pad_h = s.pad_w = 3;
  s.format = MemoryFormat::ChannelsLast;
  return s;
}

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

struct Row {
  std::string dtype;
  std::int64_t batch = 0;
  bool cudnn_benchmark = false;
  std::string pass;
  int padding = 0;
  std::vector<double> rounds_ms;
  std::string error;  // the first failure's message; empty when every round ran
  double ms() const { return median(rounds_ms); }
};

// One case (dtype, batch, benchmarking): every pass with every padding, alternating per round.
std::vector<Row> run_case(const ops::Context& ctx, DType dtype, std::int64_t batch, bool cudnn_benchmark, int rounds) {
  const ops::Conv2dShape s = stem(batch);
  auto x = random_buffer(ctx, dtype, s.input_numel(), 1), w = random_buffer(ctx, dtype, s.weight_numel(), 2);
  auto dy = random_buffer(ctx, dtype, s.output_numel(), 3);
  const memory::ScopedBlock y = device_block(ctx, s.output_numel() * element_size(dtype));
  const memory::ScopedBlock dx = device_block(ctx, s.input_numel() * element_size(dtype));
  const memory::ScopedBlock dw = device_block(ctx, s.weight_numel() * element_size(dtype));
  ops::ConvAlgorithmSettings settings = ops::conv_algorithm_settings();
  settings.benchmark = cudnn_benchmark;
  ops::set_conv_algorithm_settings(settings);
  const std::function<void()> passes[] = {
      [&] { ops::conv2d_forward(ctx, s, dtype, x.get(), w.get(), nullptr, y.get()); },
      [&] { ops::conv2d_backward_weight(ctx, s, dtype, dy.get(), x.get(), dw.get(), nullptr); },
      [&] { ops::conv2d_backward_input(ctx, s, dtype, dy.get(), w.get(), dx.get()); },
  };
  std::map<std::pair<int, int>, Row> rows;  // (pass, padding)
  for (int p = 0; p < 3; ++p)
    for (int padding : kPaddings) {
      Row& row = rows[{p, padding}];
      row.dtype = dtype_name(dtype), row.batch = batch, row.cudnn_benchmark = cudnn_benchmark;
      row.pass = kPasses[p], row.padding = padding;
    }
  for (int round = 0; round < rounds; ++round) {
    for (int padding : kPaddings) {
      const ScopedTuning scope([padding](TuningOptions& o) { o.conv_pad_channels = padding; });
      for (int p = 0; p < 3; ++p) {
        Row& row = rows[{p, padding}];
        try {
          row.rounds_ms.push_back(time_ms(ctx, passes[p]));
        } catch (const std::exception& e) {
          if (row.error.empty()) row.error = e.what();
        }
      }
    }
  }
  std::vector<Row> out;
  for (auto& [key, row] : rows) out.push_back(std::move(row));
  return out;
}

double stem_flops(std::int64_t batch) {
  const ops::Conv2dShape s = stem(batch);
  return 2.0 * s.batch * s.out_height() * s.out_width() * s.out_channels * s.kernel_h * s.kernel_w * s.in_channels;
}

std::string utc_now(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[64];
  std::strftime(text, sizeof(text), format, &utc);
  return text;
}

std::string machine_text() {
  cudaDeviceProp prop{};
  SUBLET_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  return std::string(prop.name) + ", cuDNN " + std::to_string(cudnnGetVersion()) + ", CUDA runtime " +
         std::to_string(runtime) + ", driver " + std::to_string(driver);
}

void print_case(const std::vector<Row>& rows) {
  for (const char* pass : kPasses) {
    double ms[3] = {};
    std::string errors;
    for (const Row& r : rows) {
      if (r.pass != pass) continue;
      const int column = r.padding == 4 ? 1 : r.padding == 8 ? 2 : 0;
      ms[column] = r.ms();
      if (!r.error.empty()) errors += " [" + conv_pad_channels_text(r.padding) + ": " + r.error + "]";
    }
    const Row& first = rows.front();
    const double flops = stem_flops(first.batch);
    std::printf("%-9s %5lld  %-3s  %-16s %8.3f %8.3f %8.3f   %6.2fx %6.2fx   %6.1f %6.1f %6.1f%s\n",
                first.dtype.c_str(), static_cast<long long>(first.batch), first.cudnn_benchmark ? "on" : "off", pass,
                ms[0], ms[1], ms[2], ms[0] / ms[1], ms[0] / ms[2], flops / ms[0] / 1e9, flops / ms[1] / 1e9,
                flops / ms[2] / 1e9, errors.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string started = utc_now("%Y-%m-%dT%H:%M:%SZ");
  std::string json_path = "conv_stem_bench.json";
  int rounds = 5;
  bool quick = false;
  std::string command = argv[0];
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    command += " " + arg;
    if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
      command += " " + json_path;
    } else if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
      command += " " + std::to_string(rounds);
    } else if (arg == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr, "conv_stem_bench: unknown argument '%s' (expected --json FILE, --rounds N, --quick)\n",
                   arg.c_str());
      return 2;
    }
  }
  if (!memory::cuda_available()) {
    std::fprintf(stderr, "conv_stem_bench: no CUDA device\n");
    return 1;
  }
  if (quick) rounds = 1;
  const ops::Context ctx = ops::Context::for_device(Device::cuda(0));
  const std::string machine = machine_text();
  const std::string revision = kBenchBuildRevision[0] != '\0' ? kBenchBuildRevision : "unknown";
  std::printf("conv_stem_bench: %s, revision %s, %d rounds of %d calls\n", machine.c_str(), revision.c_str(), rounds,
              kRepeats);
  std::printf("ResNet-50 stem: [N, 3, 224, 224] channels-last, 64 7x7 stride 2 padding 3; ms per call (median of "
              "rounds), speedup over unpadded, TFLOP/s of the 3-channel work\n");
  std::printf("%-9s %5s  %-3s  %-16s %8s %8s %8s   %7s %7s   %6s %6s %6s\n", "dtype", "batch", "bm", "pass", "off",
              "pad 4", "pad 8", "off/4", "off/8", "off", "pad 4", "pad 8");
  const std::vector<DType> dtypes = quick ? std::vector<DType>{DType::BFloat16}
                                          : std::vector<DType>{DType::BFloat16, DType::Float16};
  const std::vector<std::int64_t> batches = quick ? std::vector<std::int64_t>{64} : std::vector<std::int64_t>{256, 64};
  std::vector<Row> rows;
  for (DType dtype : dtypes)
    for (std::int64_t batch : batches)
      for (bool cudnn_benchmark : {false, true}) {
        const std::vector<Row> done = run_case(ctx, dtype, batch, cudnn_benchmark, rounds);
        print_case(done);
        rows.insert(rows.end(), done.begin(), done.end());
      }
  // The widening of the input alone: what the padded forward and weight gradient pay before cuDNN.
  struct WidenRow {
    std::int64_t batch;
    int padding;
    double ms;
  };
  std::vector<WidenRow> widen_rows;
  for (std::int64_t batch : batches) {
    const ops::Conv2dShape s = stem(batch);
    const std::int64_t pixels = s.batch * s.in_height * s.in_width;
    auto x = random_buffer(ctx, DType::BFloat16, s.input_numel(), 4);
    for (int padding : {4, 8}) {
      const memory::ScopedBlock wide = device_block(ctx, static_cast<std::size_t>(pixels * padding) * 2);
      const double ms = time_ms(ctx, [&] {
        ops::cuda::conv2d_widen_channels(ctx, pixels, s.in_channels, padding, x.get(), wide.get());
      });
      const double gbps = static_cast<double>(pixels) * (3 + padding) * 2 / ms / 1e6;
      std::printf("widen input %lld x 224 x 224 x 3 -> %d: %8.3f ms (%6.0f GB/s)\n", static_cast<long long>(batch),
                  padding, ms, gbps);
      widen_rows.push_back({batch, padding, ms});
    }
  }
  nlohmann::json list = nlohmann::json::array();
  for (const Row& r : rows) {
    const double ms = r.ms();
    list.push_back({{"dtype", r.dtype},
                    {"batch", r.batch},
                    {"cudnn_benchmark", r.cudnn_benchmark},
                    {"pass", r.pass},
                    {"pad_channels", conv_pad_channels_text(r.padding)},
                    {"ms", std::isfinite(ms) ? nlohmann::json(ms) : nlohmann::json(nullptr)},
                    {"rounds_ms", r.rounds_ms},
                    {"tflops", std::isfinite(ms) ? nlohmann::json(stem_flops(r.batch) / ms / 1e9) : nlohmann::json(nullptr)},
                    {"error", r.error}});
  }
  nlohmann::json widen = nlohmann::json::array();
  for (const WidenRow& r : widen_rows) widen.push_back({{"batch", r.batch}, {"pad_channels", r.padding}, {"ms", r.ms}});
  const nlohmann::json out{{"benchmark", "conv_stem_bench"},
                           {"machine", machine},
                           {"commit", revision},
                           {"date", started.substr(0, 10)},
                           {"started_utc", started},
                           {"command", command},
                           {"repeats", kRepeats},
                           {"rounds", rounds},
                           {"rows", list},
                           {"widen_input", widen}};
  std::ofstream(json_path) << out.dump(2) << "\n";
  std::printf("wrote %s\n", json_path.c_str());
  return 0;
}
