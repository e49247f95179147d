// Which of the convolution + batch norm fusions of NVIDIA's ResNet-50 training cuDNN runs on this
// GPU, and how fast: for ResNet-50's layer shapes at batch 256 (NHWC, bfloat16 and float16),
// each pattern of ops/cuda/conv_bn_graph.h is built with the backend API, and the probe reports
// whether the graph finalizes, how many engine configurations cuDNN's heuristics (mode A and the
// fallback list) propose, whether an execution plan finalizes (the first that does: its engine,
// notes and workspace) and, with --time, the median of 20 runs of that plan against the plain
// convolution pass it would replace, on random data. A pattern without an engine is a row of the
// table, not a failure.
//   cudnn_fusion_probe [--time] [--json FILE] [--dtype bf16|fp16|both] [--batch N] [--only TEXT]
// Built as build/bench/kernels/cudnn_fusion_probe in CUDA builds.
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "ops/conv2d.h"
#include "ops/cuda/conv_bn_graph.h"
#include "ops/cuda/cudnn_backend.h"

namespace {

using namespace sublet;
using namespace sublet::ops::cuda;
using sublet::ops::Conv2dShape;

constexpr int kTimedRuns = 20;
constexpr int kWarmupRuns = 2;

struct Layer {
  const char* name;
  std::int64_t in_channels, out_channels, size, kernel, stride;
};

// ResNet-50's convolutions inside the bottleneck blocks, stride 1.
constexpr Layer kLayers[] = {
    {"1x1 64->256 56", 64, 256, 56, 1, 1},   {"3x3 64->64 56", 64, 64, 56, 3, 1},
    {"1x1 256->64 56", 256, 64, 56, 1, 1},   {"3x3 128->128 28", 128, 128, 28, 3, 1},
    {"1x1 512->128 28", 512, 128, 28, 1, 1}, {"3x3 256->256 14", 256, 256, 14, 3, 1},
    {"1x1 1024->256 14", 1024, 256, 14, 1, 1}, {"3x3 512->512 7", 512, 512, 7, 3, 1},
    {"1x1 2048->512 7", 2048, 512, 7, 1, 1},
};

struct Variant {
  ConvBnPattern pattern;
  bool float_scale_bias;
};

// Every pattern; those with a per-channel scale and bias once with it in the activations' dtype
// and once in float32.
std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (int p = 0; p < kConvBnPatternCount; ++p) {
    const auto pattern = static_cast<ConvBnPattern>(p);
    out.push_back({pattern, false});
    const bool has_scale_bias = pattern == ConvBnPattern::ScaleBiasReluForward ||
                                pattern == ConvBnPattern::ScaleBiasReluForwardGenStats ||
                                pattern == ConvBnPattern::BackwardDataScaleBiasDrelu ||
                                pattern == ConvBnPattern::BackwardDataDreluBnBwdWeights ||
                                pattern == ConvBnPattern::ScaleBiasReluBackwardFilter;
    if (has_scale_bias) out.push_back({pattern, true});
  }
  return out;
}

std::string variant_name(const Variant& v) {
  return std::string(conv_bn_pattern_name(v.pattern)) + (v.float_scale_bias ? " [f32 sb]" : "");
}

Conv2dShape shape_of(const Layer& l, std::int64_t batch) {
  Conv2dShape s;
  s.batch = batch;
  s.in_channels = l.in_channels;
  s.out_channels = l.out_channels;
  s.in_height = s.in_width = l.size;
  s.kernel_h = s.kernel_w = l.kernel;
  s.stride_h = s.stride_w = l.stride;
  s.pad_h = s.pad_w = l.kernel / 2;
  s.format = MemoryFormat::ChannelsLast;
  return s;
}

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// Device pools of random values (activations' dtype in [-1, 1], float32 in [0.5, 1.5] so that
// inverse deviations and scales are positive), copied into each operand.
class RandomPools {
 public:
  static constexpr std::size_t kElements = std::size_t{1} << 24;
  RandomPools() {
    std::vector<std::uint16_t> bf16(kElements), fp16(kElements);
    std::vector<float> f32(kElements);
    std::uint64_t state = 0x9E3779B97F4A7C15ull;
    for (std::size_t i = 0; i < kElements; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const float u = static_cast<float>((state >> 40) & 0xFFFFFF) / 16777216.0f;  // [0, 1)
      const float v = 2.0f * u - 1.0f;
      std::uint32_t bits = 0;
      std::memcpy(&bits, &v, 4);
      bf16[i] = static_cast<std::uint16_t>(bits >> 16);
      fp16[i] = to_half_bits(v);
      f32[i] = 0.5f + u;
    }
    upload(bf16.data(), kElements * 2, &bf16_);
    upload(fp16.data(), kElements * 2, &fp16_);
    upload(f32.data(), kElements * 4, &f32_);
  }
  ~RandomPools() {
    cudaFree(bf16_);
    cudaFree(fp16_);
    cudaFree(f32_);
  }
  RandomPools(const RandomPools&) = delete;
  RandomPools& operator=(const RandomPools&) = delete;

  void fill(void* dst, std::size_t bytes, std::size_t element_bytes, DType dtype) const {
    const void* pool = element_bytes == 4 ? f32_ : dtype == DType::BFloat16 ? bf16_ : fp16_;
    const std::size_t pool_bytes = kElements * element_bytes;
    for (std::size_t offset = 0; offset < bytes; offset += pool_bytes) {
      check_cuda(cudaMemcpy(static_cast<char*>(dst) + offset, pool, std::min(pool_bytes, bytes - offset),
                            cudaMemcpyDeviceToDevice),
                 "cudaMemcpy (random fill)");
    }
  }

 private:
  static std::uint16_t to_half_bits(float v) {
    // |v| < 1: normal halves for |v| >= 2^-14, flushed to zero below (fine for random data).
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, 4);
    const std::uint32_t sign = (bits >> 16) & 0x8000u;
    const int exponent = static_cast<int>((bits >> 23) & 0xFF) - 127 + 15;
    if (exponent <= 0) return static_cast<std::uint16_t>(sign);
    return static_cast<std::uint16_t>(sign | (static_cast<std::uint32_t>(exponent) << 10) | ((bits >> 13) & 0x3FF));
  }
  static void upload(const void* host, std::size_t bytes, void** device) {
    check_cuda(cudaMalloc(device, bytes), "cudaMalloc (random pool)");
    check_cuda(cudaMemcpy(*device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (random pool)");
  }
  void* bf16_ = nullptr;
  void* fp16_ = nullptr;
  void* f32_ = nullptr;
};

class DeviceBuffers {
 public:
  ~DeviceBuffers() {
    for (void* p : pointers_) cudaFree(p);
  }
  void* add(std::size_t bytes) {
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, std::max<std::size_t>(bytes, 16)), "cudaMalloc (operand)");
    pointers_.push_back(p);
    return p;
  }

 private:
  std::vector<void*> pointers_;
};

struct Row {
  std::string pattern, dtype, shape, status = "ok", engine_notes;
  std::int64_t engines_a = 0, engines_fallback = 0, engine = -1, workspace = -1;
  bool plan_ok = false;
  double fused_us = -1, plain_us = -1;
};

std::string notes_text(const BackendDescriptor& engine) {
  std::string text;
  for (const cudnnBackendBehaviorNote_t note : engine_behaviour_notes(engine)) {
    if (note == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) text += "rtc ";
  }
  for (const cudnnBackendNumericalNote_t note : engine_numerical_notes(engine)) {
    if (note == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) text += "nondet ";
    if (note == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) text += "reduced-prec ";
    if (note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) text += "down-convert ";
  }
  if (!text.empty()) text.pop_back();
  return text;
}

// The median of kTimedRuns runs of the plan, in microseconds; -1 when it fails to run.
double time_plan(cudnnHandle_t handle, const BackendDescriptor& plan, const std::vector<std::int64_t>& uids,
                 const std::vector<void*>& pointers, void* workspace, cudaStream_t stream, std::string* error) {
  for (int i = 0; i < kWarmupRuns; ++i) {
    const cudnnStatus_t status = execute_plan(handle, plan, uids, pointers, workspace);
    if (status != CUDNN_STATUS_SUCCESS) {
      *error = "execute: " + cudnn_status_text(status);
      return -1;
    }
  }
  check_cuda(cudaStreamSynchronize(stream), "warm-up run");
  cudaEvent_t start = nullptr, stop = nullptr;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> times;
  for (int i = 0; i < kTimedRuns; ++i) {
    check_cuda(cudaEventRecord(start, stream), "cudaEventRecord");
    const cudnnStatus_t status = execute_plan(handle, plan, uids, pointers, workspace);
    check_cuda(cudaEventRecord(stop, stream), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop), "timed run");
    if (status != CUDNN_STATUS_SUCCESS) {
      *error = "execute: " + cudnn_status_text(status);
      break;
    }
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (times.size() != static_cast<std::size_t>(kTimedRuns)) return -1;
  std::sort(times.begin(), times.end());
  return 1000.0 * 0.5 * (times[kTimedRuns / 2 - 1] + times[kTimedRuns / 2]);
}

struct ProbeOptions {
  bool time = false;
  std::int64_t batch = 256;
};

// Builds, plans and (optionally) times one pattern on one shape; fills the row.
void probe(cudnnHandle_t handle, cudaStream_t stream, const RandomPools& pools, const Variant& v,
           const Conv2dShape& s, DType dtype, const ProbeOptions& options, Row& row) {
  ConvBnGraphOptions graph_options;
  graph_options.float_scale_bias = v.float_scale_bias;
  ConvBnGraph graph = build_conv_bn_graph(handle, v.pattern, s, dtype, graph_options);
  if (graph.status != CUDNN_STATUS_SUCCESS) {
    row.status = "graph: " + cudnn_status_text(graph.status);
    return;
  }
  std::vector<BackendDescriptor> configs = engine_configs(graph.graph, CUDNN_HEUR_MODE_A);
  row.engines_a = static_cast<std::int64_t>(configs.size());
  std::vector<BackendDescriptor> fallback = engine_configs(graph.graph, CUDNN_HEUR_MODE_FALLBACK);
  row.engines_fallback = static_cast<std::int64_t>(fallback.size());
  for (BackendDescriptor& config : fallback) configs.push_back(std::move(config));
  if (configs.empty()) {
    row.status = "no engine config";
    return;
  }
  cudnnStatus_t last = CUDNN_STATUS_SUCCESS;
  BackendDescriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  for (const BackendDescriptor& config : configs) {
    std::int64_t workspace = 0;
    auto [candidate, status] = execution_plan(handle, config, &workspace);
    last = status;
    if (status != CUDNN_STATUS_SUCCESS) continue;
    const BackendDescriptor engine = engine_of(config.get());
    row.engine = engine_index(engine);
    row.engine_notes = notes_text(engine);
    row.workspace = workspace;
    row.plan_ok = true;
    plan = std::move(candidate);
    break;
  }
  if (!row.plan_ok) {
    row.status = "no plan (" + std::to_string(configs.size()) + " configs): " + cudnn_status_text(last);
    return;
  }
  if (!options.time) return;
  DeviceBuffers buffers;
  std::vector<std::int64_t> uids;
  std::vector<void*> pointers;
  for (const ConvBnBoundTensor& t : graph.bound) {
    const std::size_t bytes = static_cast<std::size_t>(t.numel) * t.element_bytes;
    void* p = buffers.add(bytes);
    if (!t.written) pools.fill(p, bytes, t.element_bytes, dtype);
    uids.push_back(t.uid);
    pointers.push_back(p);
  }
  void* workspace = row.workspace > 0 ? buffers.add(static_cast<std::size_t>(row.workspace)) : nullptr;
  std::string error;
  row.fused_us = time_plan(handle, plan, uids, pointers, workspace, stream, &error);
  if (!error.empty()) row.status = error;
}

void print_row(const Row& r) {
  const std::string engines = std::to_string(r.engines_a) + "/" + std::to_string(r.engines_fallback);
  const std::string engine = r.plan_ok ? std::to_string(r.engine) + (r.engine_notes.empty() ? "" : " " + r.engine_notes)
                                       : "-";
  const std::string workspace = r.workspace >= 0 ? std::to_string(r.workspace) : "-";
  char fused[32] = "-", plain[32] = "-", ratio[32] = "-";
  if (r.fused_us >= 0) std::snprintf(fused, sizeof fused, "%.1f", r.fused_us);
  if (r.plain_us >= 0) std::snprintf(plain, sizeof plain, "%.1f", r.plain_us);
  if (r.fused_us > 0 && r.plain_us > 0) std::snprintf(ratio, sizeof ratio, "%.2f", r.fused_us / r.plain_us);
  std::printf("%-26s %-5s %-17s %-8s %-16s %10s %9s %9s %6s  %s\n", r.pattern.c_str(), r.dtype.c_str(), r.shape.c_str(),
              engines.c_str(), engine.c_str(), workspace.c_str(), fused, plain, ratio, r.status.c_str());
  std::fflush(stdout);
}

int usage(const char* why) {
  std::fprintf(stderr,
               "cudnn_fusion_probe: %s\nusage: cudnn_fusion_probe [--time] [--json FILE] [--dtype bf16|fp16|both] "
               "[--batch N] [--only TEXT]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  ProbeOptions options;
  std::string json_path, dtype_choice = "both", only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--time") {
      options.time = true;
    } else if (arg == "--json" && has_value) {
      json_path = argv[++i];
    } else if (arg == "--dtype" && has_value) {
      dtype_choice = argv[++i];
      if (dtype_choice != "bf16" && dtype_choice != "fp16" && dtype_choice != "both") {
        return usage(("--dtype: expected bf16, fp16 or both, got " + dtype_choice).c_str());
      }
    } else if (arg == "--batch" && has_value) {
      options.batch = std::stoll(argv[++i]);
      if (options.batch <= 0) return usage("--batch: expected a positive count");
    } else if (arg == "--only" && has_value) {
      only = argv[++i];
    } else {
      return usage(("unknown or incomplete argument " + arg).c_str());
    }
  }
  int devices = 0;
  const cudaError_t device_status = cudaGetDeviceCount(&devices);
  if (device_status != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "cudnn_fusion_probe: no CUDA device (%s); run it on a machine with an NVIDIA GPU\n",
                 device_status != cudaSuccess ? cudaGetErrorString(device_status) : "0 devices");
    return 1;
  }
  try {
    check_cuda(cudaSetDevice(0), "cudaSetDevice");
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    cudnnHandle_t handle = nullptr;
    SUBLET_CUDNN_CHECK(cudnnCreate(&handle));
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    SUBLET_CUDNN_CHECK(cudnnSetStream(handle, stream));
    std::printf("cudnn_fusion_probe: %s (sm_%d%d), cuDNN %zu, batch %lld, NHWC%s\n", prop.name, prop.major, prop.minor,
                cudnnGetVersion(), static_cast<long long>(options.batch), options.time ? ", timed" : "");
    std::printf("%-26s %-5s %-17s %-8s %-16s %10s %9s %9s %6s  %s\n", "pattern", "dtype", "shape", "engines",
                "engine", "workspace", "fused us", "plain us", "ratio", "status");
    const RandomPools pools;
    std::vector<DType> dtypes;
    if (dtype_choice != "fp16") dtypes.push_back(DType::BFloat16);
    if (dtype_choice != "bf16") dtypes.push_back(DType::Float16);
    // The plain pass of each (dtype, layer, pass), timed once.
    std::map<std::tuple<int, int, int>, double> plain_times;
    nlohmann::json rows = nlohmann::json::array();
    for (const DType dtype : dtypes) {
      for (int l = 0; l < static_cast<int>(std::size(kLayers)); ++l) {
        const Conv2dShape s = shape_of(kLayers[l], options.batch);
        for (const Variant& v : variants()) {
          Row row;
          row.pattern = variant_name(v);
          row.dtype = dtype == DType::BFloat16 ? "bf16" : "fp16";
          row.shape = kLayers[l].name;
          if (!only.empty() && row.pattern.find(only) == std::string::npos) continue;
          try {
            probe(handle, stream, pools, v, s, dtype, options, row);
            const ConvBnPattern plain = conv_bn_plain_pattern(v.pattern);
            if (options.time && row.fused_us >= 0) {
              const auto key = std::make_tuple(static_cast<int>(dtype), l, static_cast<int>(plain));
              auto found = plain_times.find(key);
              if (found == plain_times.end()) {
                Row plain_row;
                probe(handle, stream, pools, {plain, false}, s, dtype, options, plain_row);
                found = plain_times.emplace(key, plain_row.fused_us).first;
              }
              row.plain_us = found->second;
            }
          } catch (const std::exception& e) {
            row.status = std::string("error: ") + e.what();
            cudaGetLastError();  // a failed launch must not fail the next row
          }
          print_row(row);
          rows.push_back({{"pattern", row.pattern},
                          {"dtype", row.dtype},
                          {"shape", row.shape},
                          {"status", row.status},
                          {"engines_heur_a", row.engines_a},
                          {"engines_fallback", row.engines_fallback},
                          {"plan_finalized", row.plan_ok},
                          {"engine", row.engine},
                          {"engine_notes", row.engine_notes},
                          {"workspace_bytes", row.workspace},
                          {"fused_us", row.fused_us},
                          {"plain_us", row.plain_us}});
        }
      }
    }
    if (!json_path.empty()) {
      nlohmann::json out = {{"device", prop.name},
                            {"sm", prop.major * 10 + prop.minor},
                            {"cudnn_version", cudnnGetVersion()},
                            {"batch", options.batch},
                            {"layout", "NHWC"},
                            {"timed_runs", options.time ? kTimedRuns : 0},
                            {"rows", rows}};
      std::ofstream(json_path) << out.dump(1) << "\n";
      std::printf("wrote %s\n", json_path.c_str());
    }
    cudnnDestroy(handle);
    cudaStreamDestroy(stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cudnn_fusion_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
