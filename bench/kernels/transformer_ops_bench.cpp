// GPU benchmark of the transformer ops' kernels on GPT-2 small's training shapes (batch 16 x
// 1024 tokens, width 768, MLP 3072, vocabulary 50,304): layer norm, GELU (tanh), the fused
// cross-entropy, softmax rows and the embedding's table gradient (atomics and the deterministic
// sort), forward and backward, in bfloat16 (softmax in float32, as the unfused attention path
// runs it; the embedding table in float32, as a master weight), and the layer norms GPT's blocks
// run under autocast (float32 in, bfloat16 out; with the residual add fused). The yardstick is a
// device-to-device copy of the bytes each kernel must move at least (read once, write once):
// the GB/s column of a memory-bound kernel should approach the copy's.
// Prints a table; writes JSON to argv[1] (default transformer_ops_bench.json).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memory/cuda_check.h"
#include "memory/registry.h"
#include "ops/context.h"
#include "ops/copy.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/layer_norm.h"
#include "ops/loss.h"
#include "ops/softmax.h"

namespace {

using namespace sublet;

constexpr int kWarmup = 3;
constexpr int kRepeats = 20;
constexpr std::int64_t kTokens = 16 * 1024, kWidth = 768, kHidden = 3072, kVocab = 50304;

// Device memory from the caching allocator, filled with uniform values in [-2, 2) (or with ids).
class Buffer {
 public:
  Buffer(const ops::Context& ctx, std::size_t bytes) : ctx_(ctx) {
    block_ = ctx.allocator->allocate(bytes, ctx.stream, memory::BlockCategory::Temporary);
  }
  ~Buffer() { ctx_.allocator->free(block_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* get() const { return block_->ptr; }

 private:
  ops::Context ctx_;
  memory::Block* block_;
};

std::unique_ptr<Buffer> random_buffer(const ops::Context& ctx, DType dtype, std::int64_t count, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> host(static_cast<std::size_t>(count));
  for (float& v : host) v = dist(gen);
  auto staging = std::make_unique<Buffer>(ctx, host.size() * sizeof(float));
  SUBLET_CUDA_CHECK(cudaMemcpy(staging->get(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  auto out = std::make_unique<Buffer>(ctx, static_cast<std::size_t>(count) * element_size(dtype));
  ops::copy(ctx, {count}, dtype, ops::StridedRef{out->get(), {1}}, DType::Float32,
            ops::ConstStridedRef{staging->get(), {1}});
  return out;
}

std::unique_ptr<Buffer> random_ids(const ops::Context& ctx, std::int64_t count, std::int64_t limit) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<std::int64_t> dist(0, limit - 1);
  std::vector<std::int64_t> host(static_cast<std::size_t>(count));
  for (auto& v : host) v = dist(gen);
  auto out = std::make_unique<Buffer>(ctx, host.size() * sizeof(std::int64_t));
  SUBLET_CUDA_CHECK(cudaMemcpy(out->get(), host.data(), host.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice));
  return out;
}

// Mean microseconds per call over kRepeats calls after kWarmup, by CUDA events.
double time_us(const ops::Context& ctx, const std::function<void()>& launch) {
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
  return 1000.0 * ms / kRepeats;
}

struct Row {
  std::string op, shape;
  double us = 0, bytes = 0, copy_us = 0;
};

// A device-to-device copy of `bytes` (split into a read buffer and a write buffer).
double copy_us(const ops::Context& ctx, double bytes) {
  const auto half = static_cast<std::size_t>(bytes / 2);
  Buffer src(ctx, half), dst(ctx, half);
  return time_us(ctx, [&] {
    SUBLET_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), half, cudaMemcpyDeviceToDevice,
                                      static_cast<cudaStream_t>(ctx.stream)));
  });
}

Row row(const ops::Context& ctx, std::string op, std::string shape, double bytes, const std::function<void()>& launch) {
  Row r{std::move(op), std::move(shape), time_us(ctx, launch), bytes, copy_us(ctx, bytes)};
  std::printf("%-34s %-18s %10.1f us %8.0f GB/s   copy %8.0f GB/s\n", r.op.c_str(), r.shape.c_str(), r.us,
              r.bytes / r.us / 1e3, r.bytes / r.copy_us / 1e3);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string json_path = argc > 1 ? argv[1] : "transformer_ops_bench.json";
  if (!memory::cuda_available()) {
    std::fprintf(stderr, "transformer_ops_bench: no CUDA device\n");
    return 1;
  }
  const ops::Context ctx = ops::Context::for_device(Device::cuda(0));
  const DType bf16 = DType::BFloat16;
  std::vector<Row> rows;
  {  // layer norm [16384, 768]
    const ops::LayerNormShape s{kTokens, kWidth};
    auto x = random_buffer(ctx, bf16, kTokens * kWidth, 1), w = random_buffer(ctx, bf16, kWidth, 2);
    auto b = random_buffer(ctx, bf16, kWidth, 3), dy = random_buffer(ctx, bf16, kTokens * kWidth, 4);
    Buffer y(ctx, kTokens * kWidth * 2), dx(ctx, kTokens * kWidth * 2), mean(ctx, kTokens * 4), rstd(ctx, kTokens * 4);
    Buffer dw(ctx, kWidth * 2), db(ctx, kWidth * 2);
    const double bytes = 2.0 * kTokens * kWidth * 2;
    rows.push_back(row(ctx, "layer_norm forward", "16384x768 bf16", bytes, [&] {
      ops::layer_norm_forward(ctx, s, bf16, x->get(), w->get(), b->get(), 1e-5, y.get(), mean.get(), rstd.get());
    }));
    rows.push_back(row(ctx, "layer_norm backward", "16384x768 bf16", 1.5 * bytes, [&] {
      ops::layer_norm_backward(ctx, s, bf16, dy->get(), x->get(), w->get(), mean.get(), rstd.get(), dx.get(), dw.get(),
                               db.get());
    }));
  }
  {  // GPT's layer norms under autocast: a float32 residual stream in, bfloat16 out and in backward
    const ops::LayerNormShape s{kTokens, kWidth};
    const DType f32 = DType::Float32;
    const std::int64_t n = kTokens * kWidth;
    auto x = random_buffer(ctx, f32, n, 11), w = random_buffer(ctx, f32, kWidth, 12);
    auto b = random_buffer(ctx, f32, kWidth, 13), branch = random_buffer(ctx, bf16, n, 14);
    auto dy = random_buffer(ctx, bf16, n, 15), dsum = random_buffer(ctx, f32, n, 16);
    Buffer y(ctx, n * 2), sum(ctx, n * 4), dx(ctx, n * 4), dh(ctx, n * 2), mean(ctx, kTokens * 4),
        rstd(ctx, kTokens * 4), dw(ctx, kWidth * 4), db(ctx, kWidth * 4);
    ops::LayerNormForwardArgs f;
    f.shape = s;
    f.dtype = f32;
    f.output_dtype = bf16;
    f.input = x->get();
    f.weight = w->get();
    f.bias = b->get();
    f.output = y.get();
    f.mean = mean.get();
    f.rstd = rstd.get();
    rows.push_back(row(ctx, "layer_norm forward f32->bf16", "16384x768", n * 6.0, [&] {
      ops::layer_norm_fused_forward(ctx, f);
    }));
    ops::LayerNormBackwardArgs g;
    g.shape = s;
    g.dtype = f32;
    g.output_dtype = bf16;
    g.grad_output = dy->get();
    g.input = x->get();
    g.weight = w->get();
    g.mean = mean.get();
    g.rstd = rstd.get();
    g.grad_input = dx.get();
    g.grad_weight = dw.get();
    g.grad_bias = db.get();
    rows.push_back(row(ctx, "layer_norm backward bf16->f32", "16384x768", n * 10.0, [&] {
      ops::layer_norm_fused_backward(ctx, g);
    }));
    f.branch = branch->get();
    f.sum = sum.get();
    rows.push_back(row(ctx, "add + layer_norm forward", "16384x768 f32+bf16", n * 12.0, [&] {
      ops::layer_norm_fused_forward(ctx, f);
    }));
    g.input = sum.get();
    g.grad_sum = dsum->get();
    g.grad_branch = dh.get();
    rows.push_back(row(ctx, "add + layer_norm backward", "16384x768 f32+bf16", n * 16.0, [&] {
      ops::layer_norm_fused_backward(ctx, g);
    }));
  }
  {  // GELU (tanh) [16384, 3072]
    const std::int64_t n = kTokens * kHidden;
    auto x = random_buffer(ctx, bf16, n, 5), g = random_buffer(ctx, bf16, n, 6);
    Buffer y(ctx, n * 2), dx(ctx, n * 2);
    rows.push_back(row(ctx, "gelu tanh forward", "16384x3072 bf16", 2.0 * n * 2, [&] {
      ops::gelu_forward(ctx, bf16, n, ops::GeluApproximate::Tanh, x->get(), y.get());
    }));
    rows.push_back(row(ctx, "gelu tanh backward", "16384x3072 bf16", 3.0 * n * 2, [&] {
      ops::gelu_backward(ctx, bf16, n, ops::GeluApproximate::Tanh, g->get(), x->get(), dx.get());
    }));
  }
  {  // cross-entropy [16384, 50304]
    const ops::ClassScoresShape s{kTokens, kVocab};
    auto logits = random_buffer(ctx, bf16, kTokens * kVocab, 8);
    auto targets = random_ids(ctx, kTokens, kVocab);
    Buffer loss(ctx, 4), lse(ctx, kTokens * 4), grad(ctx, kTokens * kVocab * 2), grad_loss(ctx, 4);
    const float one = 1.0f;
    SUBLET_CUDA_CHECK(cudaMemcpy(grad_loss.get(), &one, sizeof(one), cudaMemcpyHostToDevice));
    const double logit_bytes = static_cast<double>(kTokens) * kVocab * 2;
    rows.push_back(row(ctx, "cross_entropy forward", "16384x50304 bf16", logit_bytes, [&] {
      ops::cross_entropy_forward(ctx, s, bf16, logits->get(), static_cast<const std::int64_t*>(targets->get()), {},
                                 loss.get(), lse.get());
    }));
    rows.push_back(row(ctx, "cross_entropy backward", "16384x50304 bf16", 2 * logit_bytes, [&] {
      ops::cross_entropy_backward(ctx, s, bf16, grad_loss.get(), logits->get(),
                                  static_cast<const std::int64_t*>(targets->get()), lse.get(), {}, grad.get());
    }));
  }
  {  // softmax over attention rows [4 x 12 x 1024, 1024], float32
    const ops::ClassScoresShape s{4 * 12 * 1024, 1024};
    auto x = random_buffer(ctx, DType::Float32, s.numel(), 9), g = random_buffer(ctx, DType::Float32, s.numel(), 10);
    Buffer y(ctx, s.numel() * 4), dx(ctx, s.numel() * 4);
    rows.push_back(row(ctx, "softmax forward", "49152x1024 f32", 2.0 * s.numel() * 4,
                       [&] { ops::softmax_forward(ctx, s, DType::Float32, x->get(), y.get()); }));
    rows.push_back(row(ctx, "softmax backward", "49152x1024 f32", 3.0 * s.numel() * 4,
                       [&] { ops::softmax_backward(ctx, s, DType::Float32, g->get(), y.get(), dx.get()); }));
  }
  {  // the token embedding's gradient [50304, 768] from 16384 ids, float32 table
    const ops::EmbeddingShape s{kTokens, kVocab, kWidth};
    auto ids = random_ids(ctx, kTokens, kVocab);
    auto g = random_buffer(ctx, DType::Float32, kTokens * kWidth, 11);
    Buffer table(ctx, kVocab * kWidth * 4);
    const double bytes = (static_cast<double>(kVocab) + kTokens) * kWidth * 4;
    for (bool deterministic : {false, true}) {
      rows.push_back(row(ctx, deterministic ? "embedding backward deterministic" : "embedding backward atomics",
                         "16384 ids, 50304x768 f32", bytes, [&] {
                           ops::embedding_backward(ctx, s, DType::Float32, g->get(),
                                                   static_cast<const std::int64_t*>(ids->get()), deterministic,
                                                   table.get());
                         }));
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (const Row& r : rows) {
    out.push_back({{"op", r.op}, {"shape", r.shape}, {"us", r.us}, {"bytes", r.bytes}, {"copy_us", r.copy_us}});
  }
  std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
