// GPU benchmark of GPT-2 small's MLP (c_fc 768 -> 3072, tanh GELU, c_proj 3072 -> 768) on a
// training step's activations (batch 16 x 1024 tokens) in bfloat16 and float16: forward, and
// forward + backward, with the GELU in cuBLASLt's GEMM epilogues (F::linear_gelu_linear's fused
// form) against the three ops (the switch off, SUBLET_GELU_EPILOGUE's default). The two
// modes alternate round by round in one process, so both see the same clocks; each round is the
// mean over kRepeats synchronized iterations, and the table shows each mode's median round.
// Prints a table; writes JSON to argv[1] (default mlp_gelu_bench.json).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tuning.h"
#include "memory/registry.h"
#include "ops/linear_gelu.h"
#include "runtime/device_memory.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"

namespace {

using namespace sublet;
namespace F = nn::functional;

constexpr int kWarmup = 3;
constexpr int kRepeats = 10;
constexpr int kRounds = 5;
constexpr std::int64_t kBatch = 16, kTokens = 1024, kWidth = 768, kHidden = 3072;

struct Mlp {
  Tensor x, w1, b1, w2, b2, upstream;
};

Mlp make_mlp(DType dtype) {
  Generator generator(1);
  const TensorOptions options = TensorOptions(dtype).device(Device::cuda(0));
  const auto leaf = [&](const Shape& sizes, double scale) {
    Tensor t = randn(sizes, generator, options).mul(scale);
    t.requires_grad_(true);
    return t;
  };
  Mlp m;
  m.x = leaf({kBatch, kTokens, kWidth}, 1.0);
  m.w1 = leaf({kHidden, kWidth}, 0.02);
  m.b1 = leaf({kHidden}, 0.02);
  m.w2 = leaf({kWidth, kHidden}, 0.02);
  m.b2 = leaf({kWidth}, 0.02);
  m.upstream = randn({kBatch, kTokens, kWidth}, generator, options);
  return m;
}

Tensor forward(const Mlp& m) { return F::linear_gelu_linear(m.x, m.w1, m.b1, m.w2, m.b2); }

void forward_backward(Mlp& m) {
  for (Tensor* t : {&m.x, &m.w1, &m.b1, &m.w2, &m.b2}) t->set_grad(Tensor());
  forward(m).backward(m.upstream);
}

// Mean milliseconds per synchronized iteration.
double round_ms(const std::function<void()>& body) {
  synchronize(Device::cuda(0));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRepeats; ++i) body();
  synchronize(Device::cuda(0));
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / kRepeats;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string json_path = argc > 1 ? argv[1] : "mlp_gelu_bench.json";
  if (!memory::cuda_available()) {
    std::fprintf(stderr, "mlp_gelu_bench: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp properties{};
  cudaGetDeviceProperties(&properties, 0);
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  nlohmann::json report = {{"device", properties.name},
                           {"date", date},
                           {"shape", {{"batch", kBatch}, {"tokens", kTokens}, {"width", kWidth}, {"hidden", kHidden}}},
                           {"repeats_per_round", kRepeats},
                           {"rounds", kRounds},
                           {"rows", nlohmann::json::array()}};
  std::printf("GPT-2 small MLP, [%lld x %lld, %lld] -> %lld -> %lld on %s\n", static_cast<long long>(kBatch),
              static_cast<long long>(kTokens), static_cast<long long>(kWidth), static_cast<long long>(kHidden),
              static_cast<long long>(kWidth), properties.name);
  std::printf("%-9s %-18s %14s %14s %9s\n", "dtype", "pass", "epilogue ms", "three ops ms", "speed-up");
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    Mlp m = make_mlp(dtype);
    const struct {
      const char* name;
      std::function<void()> body;
    } passes[] = {{"forward", [&] { forward(m); }}, {"forward+backward", [&] { forward_backward(m); }}};
    for (const auto& pass : passes) {
      std::vector<double> fused, unfused;
      const std::int64_t fallbacks_before = ops::linear_gelu_fallbacks();
      for (int round = 0; round < kRounds; ++round) {
        if (round == 0) {
          for (int i = 0; i < kWarmup; ++i) pass.body();
        }
        fused.push_back(round_ms(pass.body));
        const ScopedTuning off([](TuningOptions& o) { o.gelu_epilogue = false; });
        if (round == 0) {
          for (int i = 0; i < kWarmup; ++i) pass.body();
        }
        unfused.push_back(round_ms(pass.body));
      }
      const std::int64_t fallbacks = ops::linear_gelu_fallbacks() - fallbacks_before;
      const double fused_ms = median(fused), unfused_ms = median(unfused);
      std::printf("%-9s %-18s %14.3f %14.3f %8.2fx%s\n", dtype_name(dtype), pass.name, fused_ms, unfused_ms,
                  unfused_ms / fused_ms, fallbacks > 0 ? "  (cuBLASLt declined some calls: fallbacks counted)" : "");
      report["rows"].push_back({{"dtype", dtype_name(dtype)},
                                {"pass", pass.name},
                                {"epilogue_ms", fused_ms},
                                {"three_ops_ms", unfused_ms},
                                {"epilogue_rounds_ms", fused},
                                {"three_ops_rounds_ms", unfused},
                                {"fallbacks", fallbacks}});
    }
  }
  std::ofstream(json_path) << report.dump(2) << "\n";
  std::printf("wrote %s\n", json_path.c_str());
  return 0;
}
