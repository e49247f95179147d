// bfloat16 and float16 tensors on the GPU through the Tensor API: casts there and back give the
// CPU's bits (contiguous and transposed), host <-> device copies keep the bits, fills, sum and
// mean keep the input's dtype (as PyTorch's), and autograd through relu and sum on a 16-bit leaf
// accumulates its gradient with the 16-bit in-place add (two backward passes: 2 where x > 0),
// and casts a 16-bit gradient to a float32 leaf's dtype.
#include <gtest/gtest.h>

#include <cmath>

#include "core/half.h"
#include "runtime/factories.h"
#include "runtime/tensor.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

const Device kGpu = Device::cuda(0);

// Exact equality of float32 values; NaN only against NaN.
void expect_same_values(const std::vector<float>& got, const std::vector<float>& expected, const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(expected[i])) continue;
    EXPECT_EQ(got[i], expected[i]) << what << " [" << i << "]";
  }
}

TEST(HalfTensorCuda, CastsOnTheGpuGiveTheCpusBitsAndCopyBackExactly) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit tensor casts on the GPU");
  Generator g(3);
  const Tensor x = randn({4, 33}, g) * 300.0;  // values up to about 1000: both types round them
  for (DType half : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(half));
    const Tensor cpu_half = x.to(half);
    const Tensor gpu_half = x.to(kGpu).to(half);
    EXPECT_EQ(gpu_half.dtype(), half);
    EXPECT_EQ(gpu_half.device(), kGpu);
    // Device -> host of the 16-bit tensor (bytes), then widened on the CPU.
    expect_same_values(gpu_half.to(Device::cpu()).to_vector<float>(), cpu_half.to_vector<float>(), "to(half) on gpu");
    // Widened on the GPU.
    expect_same_values(gpu_half.to(DType::Float32).to(Device::cpu()).to_vector<float>(), cpu_half.to_vector<float>(),
                       "to(float32) on gpu");
    EXPECT_EQ(gpu_half.to(DType::Float64).to(Device::cpu()).to_vector<double>(), cpu_half.to_vector<double>());
    // Host -> device of a 16-bit tensor, and back.
    expect_same_values(cpu_half.to(kGpu).to(Device::cpu()).to_vector<float>(), cpu_half.to_vector<float>(),
                       "host -> device -> host");
    // A transposed view casts element by element on the GPU too.
    expect_same_values(x.to(kGpu).transpose(0, 1).to(half).to(Device::cpu()).to_vector<float>(),
                       x.transpose(0, 1).to(half).to_vector<float>(), "transposed cast");
    // Between the two 16-bit types.
    const DType other = half == DType::BFloat16 ? DType::Float16 : DType::BFloat16;
    expect_same_values(gpu_half.to(other).to(Device::cpu()).to_vector<float>(), cpu_half.to(other).to_vector<float>(),
                       "between the 16-bit types");
  }
}

TEST(HalfTensorCuda, FillsSumAndMeanKeepTheSixteenBitDtype) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit fills and reductions on the GPU");
  for (DType half : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(half));
    const Tensor filled = full({4, 64}, 1.5, TensorOptions().dtype(half).device(kGpu));
    for (float v : filled.to_vector<float>()) EXPECT_EQ(v, 1.5f);
    const Tensor sum = filled.sum();
    const Tensor mean = filled.mean({1});
    EXPECT_EQ(sum.dtype(), half);
    EXPECT_EQ(mean.dtype(), half);
    EXPECT_EQ(sum.item<float>(), 384.0f);  // exact in both types (315 would not be in bfloat16)
    for (float v : mean.to_vector<float>()) EXPECT_EQ(v, 1.5f);
  }
}

TEST(HalfTensorCuda, AutogradThroughReluAndSumAccumulatesSixteenBitGradients) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit autograd on the GPU");
  Generator g(5);
  const Tensor values = randn({5, 17}, g);
  const std::vector<float> v = values.to_vector<float>();
  for (DType half : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(half));
    Tensor x = values.to(kGpu).to(half).detach();
    x.requires_grad_(true);
    for (int pass = 0; pass < 2; ++pass) x.relu().sum().backward();  // the second adds in place
    const Tensor grad = x.grad();
    ASSERT_TRUE(grad.defined());
    EXPECT_EQ(grad.dtype(), half);
    const std::vector<float> got = grad.to_vector<float>();
    for (std::size_t i = 0; i < v.size(); ++i) {
      const float xi = static_cast<float>(half == DType::BFloat16 ? static_cast<float>(BFloat16(v[i]))
                                                                  : static_cast<float>(Float16(v[i])));
      EXPECT_EQ(got[i], xi > 0.0f ? 2.0f : 0.0f) << i;
    }
    // A float32 leaf (master weights) used through a 16-bit cast gets a float32 gradient.
    Tensor master = values.to(kGpu).detach();
    master.requires_grad_(true);
    (master.to(half) * 3.0).sum().backward();
    EXPECT_EQ(master.grad().dtype(), DType::Float32);
    for (float gv : master.grad().to_vector<float>()) EXPECT_EQ(gv, 3.0f);
  }
}

}  // namespace
}  // namespace sublet
