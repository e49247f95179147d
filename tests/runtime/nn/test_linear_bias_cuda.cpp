// linear with a bias on CUDA, where the bias is added in cuBLASLt's GEMM epilogue
// (ops/cuda/linear_bias_cuda.cpp): output and gradients against float64 on the CPU for float32,
// bfloat16 and float16; odd sizes, batched leading dims; autocast; the unfused fallback (a bias
// too misaligned for the epilogue); gradients bit-identical to the two-node matmul + add.
// A GPU-only binary: run it on the GPU machine with SUBLET_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include "ops/linear_bias.h"
#include "runtime/autocast.h"
#include "runtime/nn/functional.h"
#include "tests/runtime/nn/cuda_parity.h"
#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

namespace F = nn::functional;
using testing::expect_parity;
using testing::random64;

Tensor linear_of(const std::vector<Tensor>& in) { return F::linear(in[0], in[1], in[2]); }

TEST(LinearBiasCuda, AlignedShapesUseTheEpilogueAndMatchTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("linear with the bias in cuBLASLt's epilogue against the CPU");
  const std::int64_t before = ops::linear_bias_fallbacks();
  expect_parity(linear_of, {random64({64, 96}, 1), random64({48, 96}, 2), random64({48}, 3)}, "linear [64, 96] -> 48");
  expect_parity(linear_of, {random64({2, 3, 16, 64}, 4), random64({40, 64}, 5), random64({40}, 6)},
                "linear [2, 3, 16, 64] -> 40");
  // Multiples of 8 with 256-byte-aligned tensors: cuBLASLt takes every one of them.
  EXPECT_EQ(ops::linear_bias_fallbacks(), before);
}

TEST(LinearBiasCuda, OddSizesMatchTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("linear with odd M, N, K against the CPU");
  expect_parity(linear_of, {random64({7, 13}, 7), random64({5, 13}, 8), random64({5}, 9)}, "linear [7, 13] -> 5");
  expect_parity(linear_of, {random64({3, 11, 33}, 10), random64({17, 33}, 11), random64({17}, 12)},
                "linear [3, 11, 33] -> 17");
  expect_parity(linear_of, {random64({1, 1}, 13), random64({1, 1}, 14), random64({1}, 15)}, "linear [1, 1] -> 1");
}

TEST(LinearBiasCuda, MisalignedBiasFallsBackCountablyAndMatchesTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("the unfused fallback of linear with a misaligned bias");
  const std::int64_t before = ops::linear_bias_fallbacks();
  // The bias one element into a larger buffer: not 16-byte aligned, so the epilogue declines it.
  expect_parity(
      [](const std::vector<Tensor>& in) { return F::linear(in[0], in[1], in[2].narrow(0, 1, 24)); },
      {random64({9, 32}, 16), random64({24, 32}, 17), random64({25}, 18)}, "linear with a misaligned bias");
  EXPECT_EQ(ops::linear_bias_fallbacks(), before + 3);  // once per dtype
}

TEST(LinearBiasCuda, GradientsAreBitIdenticalToMatmulPlusAdd) {
  SUBLET_SKIP_WITHOUT_GPU("linear's gradients against the two-node matmul + add");
  for (DType dtype : {DType::Float32, DType::BFloat16}) {
    Tensor x = random64({4, 10, 24}, 20).to(dtype).to(Device::cuda(0)).requires_grad_(true);
    Tensor w = random64({40, 24}, 21).to(dtype).to(Device::cuda(0)).requires_grad_(true);
    Tensor b = random64({40}, 22).to(dtype).to(Device::cuda(0)).requires_grad_(true);
    const Tensor upstream = random64({4, 10, 40}, 23).to(dtype).to(Device::cuda(0));
    F::linear(x, w, b).mul(upstream).sum().backward();
    const Tensor gx = x.grad(), gw = w.grad(), gb = b.grad();
    Tensor x2 = x.detach().requires_grad_(true), w2 = w.detach().requires_grad_(true), b2 = b.detach().requires_grad_(true);
    (F::linear(x2, w2, Tensor()) + b2).mul(upstream).sum().backward();
    EXPECT_EQ(testing::normalized_error(gx, x2.grad()), 0.0) << dtype_name(dtype) << " input gradient";
    EXPECT_EQ(testing::normalized_error(gw, w2.grad()), 0.0) << dtype_name(dtype) << " weight gradient";
    EXPECT_EQ(testing::normalized_error(gb, b2.grad()), 0.0) << dtype_name(dtype) << " bias gradient";
    EXPECT_EQ(gw.sizes(), w.sizes());
    EXPECT_TRUE(gw.is_contiguous()) << dtype_name(dtype) << ": the weight's gradient is row-major, as the weight";
  }
}

TEST(LinearBiasCuda, AutocastRunsTheEpilogueInBFloat16) {
  SUBLET_SKIP_WITHOUT_GPU("linear under autocast with the bias in the epilogue");
  const Tensor x = random64({6, 32}, 30).to(DType::Float32).to(Device::cuda(0));
  const Tensor w = random64({16, 32}, 31).to(DType::Float32).to(Device::cuda(0));
  const Tensor b = random64({16}, 32).to(DType::Float32).to(Device::cuda(0));
  Tensor out;
  {
    AutocastGuard autocast(DType::BFloat16);
    out = F::linear(x, w, b);
  }
  EXPECT_EQ(out.dtype(), DType::BFloat16);
  const Tensor reference = F::linear(x.to(Device::cpu()).to(DType::Float64), w.to(Device::cpu()).to(DType::Float64),
                                     b.to(Device::cpu()).to(DType::Float64));
  EXPECT_LE(testing::normalized_error(out, reference), 3e-2);
}

}  // namespace
}  // namespace sublet
