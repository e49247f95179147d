// F::max_pool2d on CUDA through autograd: outputs and input gradients bit for bit the CPU's for
// float32, bfloat16 and float16, channels-last (channel counts that take the vectorised kernels
// and odd ones that do not) and NCHW, on inputs full of ties, NaNs and infinities; and what the
// forward keeps for the backward: one byte per output (window positions), not eight.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "memory/registry.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "runtime/tensor.h"
#include "tests/gpu_skip.h"
#include "tests/ops/max_pool_test_support.h"

namespace sublet {
namespace {

namespace F = nn::functional;

const Device kGpu = Device::cuda(0);

// Same sizes, dtype and bytes once both are NCHW on the CPU.
void expect_same_bits(const Tensor& got, const Tensor& expected, const std::string& what) {
  const Tensor a = got.to(Device::cpu()).contiguous(), b = expected.to(Device::cpu()).contiguous();
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  std::int64_t differ = 0;
  const auto* pa = static_cast<const unsigned char*>(a.data_ptr());
  const auto* pb = static_cast<const unsigned char*>(b.data_ptr());
  const std::size_t size = element_size(a.dtype());
  for (std::int64_t i = 0; i < a.numel(); ++i) differ += std::memcmp(pa + i * size, pb + i * size, size) != 0;
  EXPECT_EQ(differ, 0) << what << ": " << differ << " of " << a.numel() << " elements differ";
}

TEST(MaxPoolCuda, ForwardAndBackwardMatchTheCpuBitForBit) {
  SUBLET_SKIP_WITHOUT_GPU("max_pool2d through autograd on CUDA against the CPU");
  const auto options = F::MaxPool2dFuncOptions(3).stride(2).padding(1);
  std::uint64_t seed = 700;
  for (const DType dtype : {DType::Float32, DType::BFloat16, DType::Float16}) {
    for (const std::int64_t channels : {64, 24, 5}) {
      for (const MemoryFormat format : {MemoryFormat::ChannelsLast, MemoryFormat::Contiguous}) {
        const std::string what = std::string(dtype_name(dtype)) + " channels " + std::to_string(channels) +
                                 (format == MemoryFormat::ChannelsLast ? " channels-last" : " NCHW");
        const Shape sizes = {2, channels, 15, 13};
        const Tensor values = Tensor::from_vector(ops::testing::tied_input(shape_numel(sizes), seed++), sizes);
        // Fresh leaves: values.to(Float32) is values itself, which must not start requiring grad.
        Tensor x_cpu = values.to(dtype).detach();
        x_cpu.requires_grad_(true);
        Tensor x_gpu = values.to(dtype).to(kGpu).contiguous(format).detach();
        x_gpu.requires_grad_(true);
        const Tensor y_cpu = F::max_pool2d(x_cpu, options), y_gpu = F::max_pool2d(x_gpu, options);
        const Tensor grad = uniform(y_cpu.sizes(), -1.0, 1.0).to(dtype);
        y_cpu.backward(grad);
        y_gpu.backward(grad.to(kGpu).contiguous(format));
        expect_same_bits(y_gpu, y_cpu, what + " output");
        expect_same_bits(x_gpu.grad(), x_cpu.grad(), what + " grad_input");
      }
    }
  }
}

TEST(MaxPoolCuda, SavesOneBytePerOutputForTheBackward) {
  SUBLET_SKIP_WITHOUT_GPU("the memory max_pool2d keeps for its backward on CUDA");
  // ResNet's stem pooling at batch 8: the forward allocates the output (2 bytes an element) and
  // the saved argmax, 1 byte an element (int64 indices would be 8).
  Tensor x = uniform({8, 64, 56, 56}, -1.0, 1.0).to(DType::BFloat16).to(kGpu).contiguous(MemoryFormat::ChannelsLast);
  x.requires_grad_(true);
  const std::size_t before = memory_allocated(kGpu);
  const Tensor y = F::max_pool2d(x, F::MaxPool2dFuncOptions(3).stride(2).padding(1));
  const std::size_t grew = memory_allocated(kGpu) - before;
  const std::size_t outputs = static_cast<std::size_t>(y.numel());
  EXPECT_GE(grew, outputs * 3) << "output and positions";
  EXPECT_LE(grew, outputs * 3 + 4096) << "more than the output and one byte per output";
  y.backward(ones(y.sizes(), TensorOptions().dtype(DType::BFloat16).device(kGpu)));
  EXPECT_TRUE(x.grad().defined());
}

}  // namespace
}  // namespace sublet
