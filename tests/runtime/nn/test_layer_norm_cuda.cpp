// Layer norm's CUDA kernels against float64 on the CPU (the same values), forward and the
// input/weight/bias gradients, over widths that pick each kernel: one warp per row with 16-byte
// packs, with single elements (odd widths, misaligned rows), and one block per row (wide rows);
// rows = 1 and row counts that leave a block's warps idle; float32, bfloat16, float16 and
// float64; the weight/bias gradients identical from run to run; and a float32 norm writing a
// 16-bit output (output_dtype): the same bits, and gradients, as the norm followed by the cast;
// add_layer_norm: the same bits as x + h and the norm in every dtype pairing it fuses, and
// float64 parity.
// A GPU-only binary: run it on the GPU machine with SUBLET_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/autograd/function.h"
#include "runtime/nn/add_layer_norm.h"
#include "runtime/nn/functional.h"
#include "tests/runtime/nn/cuda_parity.h"
#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

namespace F = nn::functional;
using testing::expect_parity;
using testing::parity_errors;
using testing::random64;

// Rows far from zero mean (the two-pass statistics matter) with affine parameters, and without.
void expect_layer_norm_parity(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  const Tensor x = random64({rows, cols}, seed).mul(2.0).add(3.0);
  const Tensor w = random64({cols}, seed + 1), b = random64({cols}, seed + 2);
  const std::string what = "layer_norm " + std::to_string(rows) + "x" + std::to_string(cols);
  expect_parity([cols](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {cols}, in[1], in[2]); },
                {x, w, b}, what.c_str());
  expect_parity([cols](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {cols}); }, {x},
                (what + " no affine").c_str());
}

TEST(LayerNormCuda, WarpRowsWithPacks) {
  SUBLET_SKIP_WITHOUT_GPU("warp-per-row layer norm with 16-byte packs");
  // 768: GPT-2's width; 96 and 1000 (one pack chunk, 8 chunks of float32); 1024: 4 chunks of 16-bit.
  for (std::int64_t cols : {8, 96, 768, 1000, 1024}) expect_layer_norm_parity(37, cols, 10 + cols);
  expect_layer_norm_parity(1, 768, 20);
  expect_layer_norm_parity(1200, 768, 21);  // more rows than the backward's row blocks hold warps
}

TEST(LayerNormCuda, WarpRowsSingleElements) {
  SUBLET_SKIP_WITHOUT_GPU("warp-per-row layer norm without packs (odd widths)");
  for (std::int64_t cols : {3, 7, 33, 100, 255}) expect_layer_norm_parity(19, cols, 30 + cols);
  expect_layer_norm_parity(1, 3, 40);
  expect_layer_norm_parity(1, 129, 41);
}

// Rows of one or two elements normalise to (nearly) constants, so the input gradient is zero up
// to eps's share and relative parity only compares rounding noise: the output and the affine
// gradients are compared as above, the input gradient against float64 in absolute terms.
TEST(LayerNormCuda, RowsOfOneOrTwoElements) {
  SUBLET_SKIP_WITHOUT_GPU("warp-per-row layer norm on widths 1 and 2");
  for (std::int64_t cols : {1, 2}) {
    for (std::int64_t rows : {1, 19}) {
      const Tensor x = random64({rows, cols}, 80 + cols).mul(2.0).add(3.0);
      const Tensor w = random64({cols}, 81), b = random64({cols}, 82), upstream = random64({rows, cols}, 83);
      std::vector<Tensor> grads;
      for (const Device device : {Device::cpu(), Device::cuda(0)}) {
        const DType dtype = device.is_cuda() ? DType::Float32 : DType::Float64;
        // Fresh leaves: on the CPU x.to(Float64) is x itself.
        Tensor xi = x.to(dtype).to(device).detach(), wi = w.to(dtype).to(device).detach(), bi = b.to(dtype).to(device).detach();
        for (Tensor* t : {&xi, &wi, &bi}) t->requires_grad_(true);
        const Tensor y = F::layer_norm(xi, {cols}, wi, bi);
        y.mul(upstream.to(dtype).to(device)).sum().backward();
        for (const Tensor& t : {y.detach(), xi.grad(), wi.grad(), bi.grad()}) grads.push_back(t);
      }
      const std::string what = "layer_norm " + std::to_string(rows) + "x" + std::to_string(cols);
      for (std::size_t i : {0u, 2u, 3u}) {
        EXPECT_LE(testing::normalized_error(grads[4 + i], grads[i]), 2e-5) << what << " result " << i;
      }
      const auto got = grads[5].to(Device::cpu()).to(DType::Float64).to_vector<double>();
      const auto want = grads[1].to_vector<double>();
      for (std::size_t j = 0; j < got.size(); ++j) EXPECT_NEAR(got[j], want[j], 1e-3) << what << " input gradient " << j;
    }
  }
}

TEST(LayerNormCuda, BlockRowsForWideRows) {
  SUBLET_SKIP_WITHOUT_GPU("block-per-row layer norm (wide rows)");
  // 1030: odd for packs, too wide for single elements; 2048 and 2100: past 32 elements per lane
  // in packs. 130 rows: several row tiles in the weight/bias partials.
  for (std::int64_t cols : {1030, 2048, 2100}) expect_layer_norm_parity(130, cols, 50 + cols);
  expect_layer_norm_parity(1, 3001, 60);
}

TEST(LayerNormCuda, MisalignedRowsTakeSingleElementsOrBlocks) {
  SUBLET_SKIP_WITHOUT_GPU("layer norm on a view one element past an aligned start");
  // 200: single elements in a warp; 768: too wide for single elements, one block per row.
  constexpr std::int64_t rows = 9;
  for (std::int64_t cols : {200, 768}) {
    const Tensor flat = random64({rows * cols + 1}, 70 + cols), w = random64({cols}, 71), b = random64({cols}, 72);
    expect_parity(
        [cols](const std::vector<Tensor>& in) {
          const Tensor x = in[0].narrow(0, 1, rows * cols).view({rows, cols});
          return F::layer_norm(x, {cols}, in[1], in[2]);
        },
        {flat, w, b}, ("layer_norm misaligned " + std::to_string(cols)).c_str());
  }
}

TEST(LayerNormCuda, Float64MatchesTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("float64 layer norm against the CPU");
  for (std::int64_t cols : {7, 96, 500, 768, 1030}) {
    const Tensor x = random64({21, cols}, 80 + cols).mul(2.0).add(3.0);
    const Tensor w = random64({cols}, 81), b = random64({cols}, 82);
    const auto errors = parity_errors(
        [cols](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {cols}, in[1], in[2]); }, {x, w, b},
        DType::Float64);
    for (std::size_t i = 0; i < errors.size(); ++i) EXPECT_LE(errors[i], 1e-12) << "float64 width " << cols << " " << i;
  }
}

TEST(LayerNormCuda, GradientsAreTheSameBitsEveryRun) {
  SUBLET_SKIP_WITHOUT_GPU("layer norm gradients run to run");
  for (std::int64_t cols : {768, 2100}) {
    const Device gpu = Device::cuda(0);
    Tensor x = random64({700, cols}, 90).to(DType::Float32).to(gpu);
    Tensor w = random64({cols}, 91).to(DType::Float32).to(gpu), b = random64({cols}, 92).to(DType::Float32).to(gpu);
    const Tensor upstream = random64({700, cols}, 93).to(DType::Float32).to(gpu);
    x.requires_grad_(true);
    w.requires_grad_(true);
    b.requires_grad_(true);
    std::vector<std::vector<float>> runs;
    for (int run = 0; run < 3; ++run) {
      x.set_grad({});
      w.set_grad({});
      b.set_grad({});
      F::layer_norm(x, {cols}, w, b).mul(upstream).sum().backward();
      std::vector<float> all = x.grad().to(Device::cpu()).to_vector<float>();
      for (const Tensor& g : {w.grad(), b.grad()}) {
        const auto v = g.to(Device::cpu()).to_vector<float>();
        all.insert(all.end(), v.begin(), v.end());
      }
      runs.push_back(all);
    }
    EXPECT_EQ(runs[0], runs[1]) << cols;
    EXPECT_EQ(runs[0], runs[2]) << cols;
  }
}

// Output and the gradients of x, w, b (float32 leaves on the GPU) for a 16-bit upstream.
std::vector<float> output_and_grads(const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& fn,
                                    std::int64_t rows, std::int64_t cols, DType low) {
  const Device gpu = Device::cuda(0);
  Tensor x = random64({rows, cols}, 100 + cols).mul(2.0).add(3.0).to(DType::Float32).to(gpu);
  Tensor w = random64({cols}, 101).to(DType::Float32).to(gpu), b = random64({cols}, 102).to(DType::Float32).to(gpu);
  for (Tensor* t : {&x, &w, &b}) t->requires_grad_(true);
  const Tensor out = fn(x, w, b);
  EXPECT_EQ(out.dtype(), low);
  out.backward(random64({rows, cols}, 103).to(low).to(gpu));
  std::vector<float> all = out.detach().to(DType::Float32).to(Device::cpu()).to_vector<float>();
  for (const Tensor& t : {x, w, b}) {
    const auto v = t.grad().to(Device::cpu()).to_vector<float>();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

TEST(LayerNormCuda, SixteenBitOutputIsTheNormThenTheCast) {
  SUBLET_SKIP_WITHOUT_GPU("float32 layer norm with a 16-bit output against the norm and the cast");
  for (DType low : {DType::BFloat16, DType::Float16}) {
    for (std::int64_t cols : {1, 7, 100, 768, 1030, 2100}) {
      for (std::int64_t rows : {1, 300}) {
        const auto fused = output_and_grads(
            [&](const Tensor& x, const Tensor& w, const Tensor& b) { return F::layer_norm(x, {cols}, w, b, 1e-5, low); },
            rows, cols, low);
        const auto composed = output_and_grads(
            [&](const Tensor& x, const Tensor& w, const Tensor& b) { return F::layer_norm(x, {cols}, w, b).to(low); },
            rows, cols, low);
        EXPECT_EQ(fused, composed) << dtype_name(low) << " " << rows << "x" << cols;
      }
    }
  }
}

// Outputs of add_layer_norm (sum, then the norm) and the gradients of x, h, w, b for random
// upstreams of both, as float32 vectors (one after the other).
std::vector<float> add_norm_results(bool fused, std::int64_t rows, std::int64_t cols, DType dtype, DType branch_dtype,
                                    std::optional<DType> output_dtype) {
  const Device gpu = Device::cuda(0);
  Tensor x = random64({rows, cols}, 110 + cols).mul(2.0).add(3.0).to(dtype).to(gpu);
  Tensor h = random64({rows, cols}, 111).to(branch_dtype).to(gpu);
  Tensor w = random64({cols}, 112).to(dtype).to(gpu), b = random64({cols}, 113).to(dtype).to(gpu);
  for (Tensor* t : {&x, &h, &w, &b}) t->requires_grad_(true);
  Tensor sum, normed;
  if (fused) {
    auto result = F::add_layer_norm(x, h, {cols}, w, b, 1e-5, output_dtype);
    sum = result.sum;
    normed = result.normalized;
  } else {
    sum = x + h;
    normed = F::layer_norm(sum, {cols}, w, b, 1e-5, output_dtype);
  }
  EXPECT_EQ(sum.dtype(), dtype);
  EXPECT_EQ(normed.dtype(), output_dtype.value_or(dtype));
  autograd::backward({sum, normed}, {random64({rows, cols}, 114).to(sum.dtype()).to(gpu),
                                     random64({rows, cols}, 115).to(normed.dtype()).to(gpu)});
  std::vector<float> all;
  for (const Tensor& t : {sum, normed, x.grad(), h.grad(), w.grad(), b.grad()}) {
    const auto v = t.detach().to(DType::Float32).to(Device::cpu()).to_vector<float>();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

TEST(LayerNormCuda, FusedAddIsTheAddThenTheNorm) {
  SUBLET_SKIP_WITHOUT_GPU("add_layer_norm against x + h and layer_norm");
  struct Case {
    DType dtype, branch;
    std::optional<DType> output;
  };
  const Case cases[] = {
      {DType::Float32, DType::Float32, std::nullopt},
      {DType::Float32, DType::BFloat16, DType::BFloat16},  // autocast's residual stream
      {DType::Float32, DType::Float16, DType::Float16},
      {DType::BFloat16, DType::BFloat16, std::nullopt},
      {DType::Float16, DType::Float16, std::nullopt},
      {DType::Float64, DType::Float64, std::nullopt},
  };
  for (const Case& c : cases) {
    for (std::int64_t cols : {1, 7, 100, 768, 1030, 2100}) {
      for (std::int64_t rows : {1, 300}) {
        EXPECT_EQ(add_norm_results(true, rows, cols, c.dtype, c.branch, c.output),
                  add_norm_results(false, rows, cols, c.dtype, c.branch, c.output))
            << dtype_name(c.dtype) << " + " << dtype_name(c.branch) << " " << rows << "x" << cols;
      }
    }
  }
}

TEST(LayerNormCuda, FusedAddMatchesFloat64OnTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("add_layer_norm against float64 on the CPU");
  const Tensor x = random64({300, 768}, 120).mul(2.0).add(3.0), h = random64({300, 768}, 121);
  const Tensor w = random64({768}, 122), b = random64({768}, 123);
  expect_parity(
      [](const std::vector<Tensor>& in) {
        const auto [sum, normed] = F::add_layer_norm(in[0], in[1], {768}, in[2], in[3]);
        return sum.mul(0.5).add(normed);
      },
      {x, h, w, b}, "add_layer_norm");
}

}  // namespace
}  // namespace sublet
