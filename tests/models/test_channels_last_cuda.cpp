// Channels-last on the GPU: a ResNet converted with Module::to(ChannelsLast) and fed
// channels-last inputs trains step for step as the NCHW one, and (where the CUDA kernel tables
// have channels-last entries: the NHWC kernels) its activations stay channels-last from
// the first convolution to the global pooling, with no layout conversion inside the step.
#include <gtest/gtest.h>

#include "channels_last_support.h"
#include "ops/batch_norm_kernels.h"
#include "ops/conv2d_kernels.h"
#include "ops/pooling_kernels.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

constexpr MemoryFormat kCL = MemoryFormat::ChannelsLast;

bool cuda_has_channels_last_kernels() {
  return ops::conv2d_forward_kernels().has(DeviceType::CUDA, DType::Float32, kCL) &&
         ops::batch_norm_forward_training_kernels().has(DeviceType::CUDA, DType::Float32, kCL);
}

TEST(ChannelsLastCuda, ResNetTrainsStepForStepAsNchw) {
  SUBLET_SKIP_WITHOUT_GPU("a ResNet-20 step channels-last against NCHW on CUDA");
  int checked = 0;
  const testing::StepLosses losses =
      testing::channels_last_steps("resnet20", Device::cuda(0), 3, [&](nn::Module& model) {
        for (const auto& [name, p] : model.named_parameters()) {
          if (p.dim() != 4) continue;
          ++checked;
          ASSERT_TRUE(p.grad().defined()) << name;
          EXPECT_TRUE(p.grad().is_contiguous(kCL)) << name << " " << shape_str(p.grad().strides());
        }
      });
  EXPECT_GT(checked, 0);
  for (std::size_t i = 0; i < losses.nchw.size(); ++i) {
    // float32; cuDNN may pick other algorithms for NHWC, so sums run in another order.
    EXPECT_LE(std::abs(losses.nchw[i] - losses.channels_last[i]), 2e-3 * std::abs(losses.nchw[i])) << "step " << i;
  }
}

TEST(ChannelsLastCuda, ActivationsStayChannelsLastThroughTheNetwork) {
  SUBLET_SKIP_WITHOUT_GPU("channels-last activations through a ResNet on CUDA");
  if (!cuda_has_channels_last_kernels()) {
    GTEST_SKIP() << "this build registers no channels-last CUDA kernels for convolution and batch norm";
  }
  auto model = models::create_model("resnet20", {.in_channels = 3, .num_classes = 10, .seed = 2});
  model->to(Device::cuda(0));
  model->to(kCL);
  int four_d = 0;
  for (auto& [name, module] : model->named_modules()) {
    if (name.empty()) continue;
    module->register_forward_hook([&four_d, name = name](nn::Module&, const Tensor&, const Tensor& out) {
      if (out.dim() != 4 || (out.size(2) == 1 && out.size(3) == 1)) return;
      ++four_d;
      EXPECT_EQ(out.suggest_memory_format(), kCL) << name << " " << shape_str(out.strides());
    });
  }
  Generator g(1);
  const Tensor x = rand({4, 3, 16, 16}, g).to(Device::cuda(0)).contiguous(kCL);
  (*model)(x).sum().backward();
  EXPECT_GT(four_d, 10);
}

}  // namespace
}  // namespace sublet
