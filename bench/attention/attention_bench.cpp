// Forward and backward of scaled dot-product attention at GPT-2 small's shapes (B=16, H=12,
// T=1024, D=64, causal): the fused bfloat16 kernel against the float32 cuBLAS path (the scores
// materialised) in the same run, each pass timed with CUDA events around the op's kernels
// (ops::attention_forward / attention_backward on preallocated tensors: no autograd, no
// allocation in the timed region besides the ops' own workspaces). TFLOP/s count FlashAttention's
// convention: forward 4 B H T^2 D (halved when causal), backward 2.5x the forward.
// bench/attention/pytorch_attention.py times PyTorch's SDPA on the same shapes.
// Usage: attention_bench [OUT.json] [--batch B --heads H --seq T --head-dim D --repeats N]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memory/cuda_check.h"
#include "core/errors.h"
#include "memory/registry.h"
#include "ops/attention.h"
#include "runtime/factories.h"
#include "runtime/tensor.h"

namespace {

using namespace sublet;

struct Settings {
  std::string out = "attention_bench.json";
  std::int64_t batch = 16, heads = 12, seq = 1024, head_dim = 64;
  int repeats = 20;
  bool causal = true;
};

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto next = [&]() -> std::int64_t {
      if (i + 1 >= argc) throw ValueError("attention_bench: " + arg + " needs a value");
      return std::atoll(argv[++i]);
    };
    if (arg == "--batch") s.batch = next();
    else if (arg == "--heads") s.heads = next();
    else if (arg == "--seq") s.seq = next();
    else if (arg == "--head-dim") s.head_dim = next();
    else if (arg == "--repeats") s.repeats = static_cast<int>(next());
    else if (arg == "--full") s.causal = false;
    else if (!arg.empty() && arg[0] != '-') s.out = arg;
    else throw ValueError("attention_bench: unknown option " + arg);
  }
  return s;
}

float elapsed_ms(const std::function<void()>& enqueue) {
  cudaEvent_t start = nullptr, stop = nullptr;
  SUBLET_CUDA_CHECK(cudaEventCreate(&start));
  SUBLET_CUDA_CHECK(cudaEventCreate(&stop));
  SUBLET_CUDA_CHECK(cudaEventRecord(start, nullptr));
  enqueue();
  SUBLET_CUDA_CHECK(cudaEventRecord(stop, nullptr));
  SUBLET_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  SUBLET_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  SUBLET_CUDA_CHECK(cudaEventDestroy(start));
  SUBLET_CUDA_CHECK(cudaEventDestroy(stop));
  return ms;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

ops::ConstAttentionRef in_ref(const Tensor& t) { return {t.data_ptr(), {t.stride(0), t.stride(1), t.stride(2)}}; }
ops::AttentionRef out_ref(const Tensor& t) { return {t.data_ptr(), {t.stride(0), t.stride(1), t.stride(2)}}; }

struct Row {
  std::string name;
  double forward_ms = 0, backward_ms = 0;
};

Row time_path(const Settings& s, DType dtype, const std::string& name) {
  const Device gpu = Device::cuda(0);
  Generator gen(1);
  const Shape sizes = {s.batch, s.heads, s.seq, s.head_dim};
  const TensorOptions options = TensorOptions().device(gpu).dtype(dtype);
  const Tensor q = randn(sizes, gen).to(dtype).to(gpu), k = randn(sizes, gen).to(dtype).to(gpu);
  const Tensor v = randn(sizes, gen).to(dtype).to(gpu), grad_out = randn(sizes, gen).to(dtype).to(gpu);
  const Tensor out = Tensor::empty(sizes, options), dq = Tensor::empty(sizes, options);
  const Tensor dk = Tensor::empty(sizes, options), dv = Tensor::empty(sizes, options);
  const Tensor lse = Tensor::empty({s.batch, s.heads, s.seq}, options.dtype(ops::attention_lse_dtype(dtype)));
  ops::AttentionShape shape;
  shape.batch = s.batch;
  shape.heads = s.heads;
  shape.query_len = shape.key_len = s.seq;
  shape.head_dim = s.head_dim;
  shape.causal = s.causal;
  shape.scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  const ops::Context ctx = ops::Context::for_device(gpu, nullptr);
  const auto forward = [&] {
    ops::attention_forward(ctx, shape, dtype, in_ref(q), in_ref(k), in_ref(v), out_ref(out), lse.data_ptr());
  };
  const auto backward = [&] {
    ops::attention_backward(ctx, shape, dtype, in_ref(q), in_ref(k), in_ref(v), in_ref(out), in_ref(grad_out),
                            lse.data_ptr(), out_ref(dq), out_ref(dk), out_ref(dv));
  };
  for (int i = 0; i < 3; ++i) {
    forward();
    backward();
  }
  std::vector<double> f, b;
  for (int i = 0; i < s.repeats; ++i) {
    f.push_back(elapsed_ms(forward));
    b.push_back(elapsed_ms(backward));
  }
  return {name, median(f), median(b)};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Settings s = parse(argc, argv);
    if (!memory::cuda_available()) {
      std::fprintf(stderr, "attention_bench: no CUDA device\n");
      return 1;
    }
    cudaDeviceProp props{};
    SUBLET_CUDA_CHECK(cudaGetDeviceProperties(&props, 0));
    const double forward_flops =
        4.0 * s.batch * s.heads * static_cast<double>(s.seq) * s.seq * s.head_dim * (s.causal ? 0.5 : 1.0);
    const double backward_flops = 2.5 * forward_flops;
    std::vector<Row> rows = {time_path(s, DType::BFloat16, "sublet fused bf16"),
                             time_path(s, DType::Float32, "sublet cuBLAS float32")};
    std::printf("attention B=%lld H=%lld T=%lld D=%lld %s on %s (median of %d)\n", static_cast<long long>(s.batch),
                static_cast<long long>(s.heads), static_cast<long long>(s.seq), static_cast<long long>(s.head_dim),
                s.causal ? "causal" : "full", props.name, s.repeats);
    std::printf("%-24s %10s %10s %10s %9s %9s %9s\n", "path", "fwd ms", "bwd ms", "total ms", "fwd TF/s", "bwd TF/s",
                "tot TF/s");
    nlohmann::json json;
    json["device"] = props.name;
    json["shape"] = {{"batch", s.batch}, {"heads", s.heads}, {"seq", s.seq}, {"head_dim", s.head_dim},
                     {"causal", s.causal}};
    json["repeats"] = s.repeats;
    json["flops"] = {{"forward", forward_flops}, {"backward", backward_flops}};
    for (const Row& r : rows) {
      const double total = r.forward_ms + r.backward_ms;
      const double tf = forward_flops / (r.forward_ms * 1e9), tb = backward_flops / (r.backward_ms * 1e9);
      const double tt = (forward_flops + backward_flops) / (total * 1e9);
      std::printf("%-24s %10.3f %10.3f %10.3f %9.1f %9.1f %9.1f\n", r.name.c_str(), r.forward_ms, r.backward_ms, total,
                  tf, tb, tt);
      json["rows"].push_back({{"name", r.name}, {"forward_ms", r.forward_ms}, {"backward_ms", r.backward_ms},
                              {"total_ms", total}, {"forward_tflops", tf}, {"backward_tflops", tb},
                              {"total_tflops", tt}});
    }
    const double ratio = (rows[1].forward_ms + rows[1].backward_ms) / (rows[0].forward_ms + rows[0].backward_ms);
    std::printf("fused bf16 is %.2fx the float32 path (forward + backward)\n", ratio);
    json["fused_speedup_over_float32"] = ratio;
    std::ofstream(s.out) << json.dump(2) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attention_bench: %s\n", e.what());
    return 1;
  }
}
