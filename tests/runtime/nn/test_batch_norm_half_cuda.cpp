// The runtime's batch norm with a bfloat16/float16 input on the GPU (the batch-norm dtype rule):
// float32 weight, bias and running statistics are taken as they are, the output and the input's
// gradient are 16-bit, the weight's and bias's gradients float32, the running statistics stay
// float32 and move; batch_norm_relu (fused on the GPU for 16-bit inputs of any size) likewise,
// with the residual's gradient 16-bit. Values against float64 on the CPU from the same 16-bit
// inputs: activations within 2^-7 (bfloat16) / 2^-10 (float16) of their scale, parameter
// gradients and statistics within 1e-4 relative of theirs (float32 accumulation). NaN fails.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "runtime/tensor.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

namespace F = nn::functional;
const Device kGpu = Device::cuda(0);

// max |got - expected| / max |expected| (both to float64 on the CPU); NaN anywhere gives NaN.
double relative_error(const Tensor& got, const Tensor& expected) {
  const Tensor e = expected.to(Device::cpu()).to(DType::Float64);
  const Tensor g = got.to(Device::cpu()).to(DType::Float64);
  const double scale = e.pow(2.0).max().sqrt().item<double>();
  return g.sub(e).pow(2.0).max().sqrt().item<double>() / scale;
}

double activation_tolerance(DType half) { return half == DType::BFloat16 ? 0x1p-7 : 0x1p-10; }

Tensor leaf(const Tensor& t) { return t.detach().requires_grad_(); }

void check(DType half, bool relu) {
  SCOPED_TRACE(std::string(dtype_name(half)) + (relu ? " batch_norm_relu" : " batch_norm"));
  Generator gen(7);
  const Shape sizes = {4, 6, 9, 11};
  const Tensor x = randn(sizes, gen).to(half), residual = randn(sizes, gen).to(half);
  const Tensor grad_out = randn(sizes, gen).to(half);
  const Tensor w = rand({6}, gen) + 0.5, b = randn({6}, gen);

  // GPU: 16-bit activations, float32 parameters and statistics.
  Tensor xg = leaf(x.to(kGpu)), rg = leaf(residual.to(kGpu)), wg = leaf(w.to(kGpu)), bg = leaf(b.to(kGpu));
  Tensor rm = zeros({6}).to(kGpu), rv = ones({6}).to(kGpu);
  const Tensor out = relu ? F::batch_norm_relu(xg, rg, rm, rv, wg, bg, /*training=*/true)
                          : F::batch_norm(xg, rm, rv, wg, bg, /*training=*/true);
  EXPECT_EQ(out.dtype(), half);
  out.backward(grad_out.to(kGpu));
  ASSERT_TRUE(xg.grad().defined() && wg.grad().defined() && bg.grad().defined());
  EXPECT_EQ(xg.grad().dtype(), half);
  EXPECT_EQ(wg.grad().dtype(), DType::Float32);
  EXPECT_EQ(bg.grad().dtype(), DType::Float32);
  EXPECT_EQ(rm.dtype(), DType::Float32);

  // float64 reference on the CPU from the same 16-bit values.
  Tensor x64 = leaf(x.to(DType::Float64)), r64 = leaf(residual.to(DType::Float64));
  Tensor w64 = leaf(w.to(DType::Float64)), b64 = leaf(b.to(DType::Float64));
  const TensorOptions f64 = TensorOptions().dtype(DType::Float64);
  Tensor rm64 = zeros({6}, f64), rv64 = ones({6}, f64);
  const Tensor out64 = relu ? F::batch_norm_relu(x64, r64, rm64, rv64, w64, b64, true)
                            : F::batch_norm(x64, rm64, rv64, w64, b64, true);
  // The ReLU's mask from the GPU's output (a value within rounding of 0 may differ in sign).
  std::vector<double> g = grad_out.to_vector<double>();
  if (relu) {
    const std::vector<double> y = out.to(Device::cpu()).to_vector<double>();
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = y[i] > 0 ? g[i] : 0.0;
  }
  const Tensor g64 = Tensor::from_vector<double>(g, sizes);
  out64.backward(g64);

  const double tol = activation_tolerance(half);
  EXPECT_LE(relative_error(out, out64), tol) << "output";
  EXPECT_LE(relative_error(xg.grad(), x64.grad()), 2 * tol) << "grad_input";
  EXPECT_LE(relative_error(wg.grad(), w64.grad()), 1e-4) << "grad_weight";
  EXPECT_LE(relative_error(bg.grad(), b64.grad()), 1e-4) << "grad_bias";
  EXPECT_LE(relative_error(rm, rm64), 1e-4) << "running_mean";
  EXPECT_LE(relative_error(rv, rv64), 1e-4) << "running_var";
  if (relu) {
    EXPECT_EQ(rg.grad().dtype(), half);
    EXPECT_LE(relative_error(rg.grad(), r64.grad()), 0.0) << "grad_residual (grad_output where output > 0)";
  }

  // Eval: the running statistics as constants; the output stays 16-bit.
  const Tensor eval = F::batch_norm(xg.detach(), rm, rv, wg.detach(), bg.detach(), /*training=*/false);
  EXPECT_EQ(eval.dtype(), half);
  const Tensor eval64 = F::batch_norm(x.to(DType::Float64), rm.to(Device::cpu()).to(DType::Float64),
                                      rv.to(Device::cpu()).to(DType::Float64), w.to(DType::Float64),
                                      b.to(DType::Float64), false);
  EXPECT_LE(relative_error(eval, eval64), tol) << "eval output";
}

TEST(BatchNormHalfCuda, SixteenBitInputFloat32ParametersThroughTheRuntime) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit batch norm through the runtime on the GPU");
  for (DType half : {DType::BFloat16, DType::Float16}) {
    check(half, false);
    check(half, true);
  }
}

}  // namespace
}  // namespace sublet
