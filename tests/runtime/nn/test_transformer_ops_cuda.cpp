// The transformer ops on CUDA against the CPU (float64 on the same values) on random data, in
// float32, bfloat16 and float16, forward and backward: embedding (atomics and the deterministic
// sort), layer_norm, gelu (both forms), softmax/log_softmax, the sequence cross-entropy over
// GPT-2's vocabulary (with its memory bound), N-D matmul and linear, clip_grad_norm_.
// A GPU-only binary: run it on the GPU machine with SUBLET_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include "memory/registry.h"
#include "runtime/nn/clip_grad.h"
#include "runtime/nn/functional.h"
#include "tests/runtime/nn/cuda_parity.h"
#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

namespace F = nn::functional;
using testing::expect_parity;
using testing::random64;

Tensor random_ids(const Shape& sizes, std::int64_t limit, std::uint64_t seed) {
  Generator g(seed);
  return uniform(sizes, 0.0, static_cast<double>(limit), g, DType::Float64).to(DType::Int64);
}

TEST(TransformerOpsCuda, EmbeddingMatchesCpuAndDeterministicModeIsBitIdentical) {
  SUBLET_SKIP_WITHOUT_GPU("embedding forward/backward against the CPU");
  const Tensor table = random64({300, 40}, 1);
  const Tensor ids = random_ids({8, 65}, 300, 2);  // many repeats
  for (bool deterministic : {false, true}) {
    const auto options = F::EmbeddingFuncOptions().deterministic(deterministic);
    expect_parity([&](const std::vector<Tensor>& in) { return F::embedding(in[0], in[1], options); }, {table, ids},
                  deterministic ? "embedding deterministic" : "embedding atomics");
  }
  // The deterministic float32 gradient: the same bits on every run.
  Tensor w = table.to(DType::Float32).to(Device::cuda(0));
  w.requires_grad_(true);
  const Tensor ids_gpu = ids.to(Device::cuda(0));
  const Tensor upstream = random64({8, 65, 40}, 3).to(DType::Float32).to(Device::cuda(0));
  std::vector<std::vector<float>> grads;
  for (int run = 0; run < 3; ++run) {
    w.set_grad({});
    F::embedding(w, ids_gpu, F::EmbeddingFuncOptions().deterministic(true)).mul(upstream).sum().backward();
    grads.push_back(w.grad().to(Device::cpu()).to_vector<float>());
  }
  EXPECT_EQ(grads[0], grads[1]);
  EXPECT_EQ(grads[0], grads[2]);
  const Tensor bad = Tensor::from_vector<std::int64_t>({1, 300}, {2}).to(Device::cuda(0));
  testing::expect_throw_with([&] { F::embedding(w, bad); }, {"embedding", "id 300", "position 1", "300 embeddings"});
}

TEST(TransformerOpsCuda, LayerNormMatchesCpu) {
  SUBLET_SKIP_WITHOUT_GPU("layer_norm forward/backward against the CPU");
  const Tensor x = random64({4, 33, 96}, 4).mul(2.0).add(1.5), w = random64({96}, 5), b = random64({96}, 6);
  expect_parity([](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {96}, in[1], in[2]); }, {x, w, b},
                "layer_norm");
  expect_parity([](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {96}); }, {x}, "layer_norm no affine");
  // 300 rows of 768: several row tiles in the weight/bias gradient.
  const Tensor wide = random64({300, 768}, 7), ww = random64({768}, 8), wb = random64({768}, 9);
  expect_parity([](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {768}, in[1], in[2]); },
                {wide, ww, wb}, "layer_norm 300x768");
}

TEST(TransformerOpsCuda, GeluMatchesCpu) {
  SUBLET_SKIP_WITHOUT_GPU("gelu against the CPU");
  const Tensor x = random64({7, 129}, 10).mul(3.0);
  expect_parity([](const std::vector<Tensor>& in) { return F::gelu(in[0]); }, {x}, "gelu");
  expect_parity([](const std::vector<Tensor>& in) { return F::gelu(in[0], F::GeluApproximate::Tanh); }, {x},
                "gelu tanh");
}

TEST(TransformerOpsCuda, SoftmaxAndLogSoftmaxMatchCpu) {
  SUBLET_SKIP_WITHOUT_GPU("softmax/log_softmax against the CPU");
  const Tensor x = random64({2, 3, 17, 300}, 11).mul(3.0);
  expect_parity([](const std::vector<Tensor>& in) { return F::softmax(in[0], -1); }, {x}, "softmax");
  expect_parity([](const std::vector<Tensor>& in) { return F::log_softmax(in[0], -1); }, {x}, "log_softmax");
  expect_parity([](const std::vector<Tensor>& in) { return F::softmax(in[0], 1); }, {x}, "softmax dim 1");
}

TEST(TransformerOpsCuda, CrossEntropyOverGpt2VocabularyMatchesCpuWithoutAFloat32Copy) {
  SUBLET_SKIP_WITHOUT_GPU("the fused cross-entropy against the CPU");
  constexpr std::int64_t kVocab = 50304;
  const Tensor logits = random64({2, 16, kVocab}, 12).mul(2.0);
  std::vector<std::int64_t> ids = random_ids({2, 16}, kVocab, 13).to_vector<std::int64_t>();
  ids[3] = ids[20] = -100;  // ignored
  const Tensor targets = Tensor::from_vector<std::int64_t>(ids, {2, 16});
  for (double smoothing : {0.0, 0.1}) {
    const auto options = F::CrossEntropyFuncOptions().label_smoothing(smoothing);
    expect_parity([&](const std::vector<Tensor>& in) { return F::cross_entropy(in[0], in[1], options); },
                  {logits, targets}, smoothing == 0 ? "cross_entropy" : "cross_entropy smoothing");
  }
  // bfloat16 logits: forward and backward add the logits' bfloat16 gradient and per-row scalars;
  // a float32 copy of the logits would add twice the logits' bytes more.
  Tensor low = logits.to(DType::BFloat16).to(Device::cuda(0));
  low.requires_grad_(true);
  const Tensor targets_gpu = targets.to(Device::cuda(0));
  const std::size_t before = memory_allocated(Device::cuda(0));
  reset_peak_memory_stats(Device::cuda(0));
  const Tensor loss = F::cross_entropy(low, targets_gpu);
  EXPECT_EQ(loss.dtype(), DType::Float32);
  loss.backward();
  EXPECT_EQ(low.grad().dtype(), DType::BFloat16);
  const std::size_t peak = max_memory_allocated(Device::cuda(0)) - before;
  EXPECT_LE(peak, low.nbytes() + low.nbytes() / 2) << "logits " << low.nbytes() << " bytes";
}

TEST(TransformerOpsCuda, BatchedMatmulAndLinearMatchCpu) {
  SUBLET_SKIP_WITHOUT_GPU("N-D matmul and linear against the CPU");
  expect_parity([](const std::vector<Tensor>& in) { return in[0].matmul(in[1]); },
                {random64({2, 3, 17, 8}, 14), random64({2, 3, 8, 19}, 15)}, "matmul 4-D");
  expect_parity([](const std::vector<Tensor>& in) { return in[0].matmul(in[1].transpose(-2, -1)); },
                {random64({2, 1, 5, 8}, 16), random64({3, 4, 8}, 17)}, "matmul broadcast, transposed");
  expect_parity([](const std::vector<Tensor>& in) { return F::linear(in[0], in[1], in[2]); },
                {random64({4, 9, 32}, 18), random64({48, 32}, 19), random64({48}, 20)}, "linear [B, T, C]");
}

TEST(TransformerOpsCuda, ClipGradNormOnTheDeviceMatchesCpu) {
  SUBLET_SKIP_WITHOUT_GPU("clip_grad_norm_ on CUDA gradients");
  std::vector<Tensor> gpu, cpu;
  for (const Shape& s : {Shape{64, 33}, Shape{1000}, Shape{7}}) {
    const Tensor g = random64(s, 21 + static_cast<std::uint64_t>(s[0])).to(DType::Float32);
    Tensor p = zeros(s).to(Device::cuda(0)), q = zeros(s);
    p.requires_grad_(true);
    q.requires_grad_(true);
    p.set_grad(g.to(Device::cuda(0)));
    q.set_grad(g.clone());
    gpu.push_back(p);
    cpu.push_back(q);
  }
  const Tensor norm = nn::utils::clip_grad_norm_tensor_(gpu, 1.0);
  EXPECT_TRUE(norm.device().is_cuda());
  const double expected = nn::utils::clip_grad_norm_(cpu, 1.0);
  EXPECT_NEAR(norm.item<double>(), expected, 1e-5 * expected);
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    EXPECT_LE(testing::normalized_error(gpu[i].grad(), cpu[i].grad()), 1e-5) << "parameter " << i;
  }
}

}  // namespace
}  // namespace sublet
