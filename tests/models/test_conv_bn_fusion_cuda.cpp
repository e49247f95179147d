// The convolution + batch norm fusion on the GPU: cuDNN's fused plans (where it has engines for
// the shape) against the composition of separate kernels on random bfloat16 channels-last data,
// for outputs and per-channel sums; ResNet blocks and a short ResNet-50 training run with
// SUBLET_CONV_BN_FUSION=auto against the separate batch norms. Each test prints how many calls ran
// fused, since a cuDNN without the engines compares the composition with itself.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "conv_bn_fusion_checks.h"
#include "models/registry.h"
#include "models/resnet_blocks.h"
#include "ops/conv_bn_fusion.h"
#include "runtime/autocast.h"
#include "runtime/factories.h"
#include "runtime/kernel_args.h"
#include "runtime/nn/functional.h"
#include "runtime/optim/sgd.h"
#include "tests/gpu_skip.h"

namespace sublet::models {
namespace {

const Device kGpu = Device::cuda(0);
constexpr MemoryFormat kCL = MemoryFormat::ChannelsLast;

void print_counts(const char* what) {
  const ops::ConvBnFusionCounts c = ops::conv_bn_fusion_counts();
  std::cout << what << ": " << c.fused << " fused calls, " << c.unfused_no_engine << " without a cuDNN engine, "
            << c.unfused_requested << " unfused on request\n";
}

struct Layer {
  std::int64_t in, out, size, kernel, stride;
};

TEST(ConvBnFusionCuda, FusedPlansMatchTheCompositionOnResNetShapes) {
  SUBLET_SKIP_WITHOUT_GPU("cuDNN's fused convolution + batch norm plans against separate kernels");
  const Layer layers[] = {{64, 256, 28, 1, 1}, {64, 64, 28, 3, 1}, {256, 64, 14, 1, 1}, {128, 128, 14, 3, 2},
                          {512, 128, 7, 1, 1}};
  Generator g(11);
  ops::reset_conv_bn_fusion_counts();
  for (const Layer& l : layers) {
    for (const bool prologue : {false, true}) {
      ops::Conv2dShape s;
      s.batch = 8;
      s.in_channels = l.in;
      s.out_channels = l.out;
      s.in_height = s.in_width = l.size;
      s.kernel_h = s.kernel_w = l.kernel;
      s.stride_h = s.stride_w = l.stride;
      s.pad_h = s.pad_w = l.kernel / 2;
      s.format = kCL;
      const auto bf16 = TensorOptions().dtype(DType::BFloat16).device(kGpu);
      const auto f32 = TensorOptions().device(kGpu);
      const Tensor x = randn({s.batch, s.in_channels, s.in_height, s.in_width}, g).to(kGpu).to(DType::BFloat16).contiguous(kCL);
      const Tensor w = (randn({s.out_channels, s.in_channels, s.kernel_h, s.kernel_w}, g) * 0.1).to(kGpu).to(DType::BFloat16).contiguous(kCL);
      const Tensor scale = uniform({s.in_channels}, 0.5, 1.5, g).to(kGpu);
      const Tensor bias = uniform({s.in_channels}, -0.5, 0.5, g).to(kGpu);
      const auto ctx = sublet::detail::context_for(x);
      Tensor y[2], sum[2], sqsum[2];
      for (int route = 0; route < 2; ++route) {
        y[route] = Tensor::empty({s.batch, s.out_channels, s.out_height(), s.out_width()}, bf16, kCL);
        sum[route] = Tensor::empty({s.out_channels}, f32);
        sqsum[route] = Tensor::empty({s.out_channels}, f32);
        ops::conv2d_scale_bias_relu_genstats(
            ctx, s, DType::BFloat16, x.data_ptr(), prologue ? static_cast<const float*>(scale.data_ptr()) : nullptr,
            prologue ? static_cast<const float*>(bias.data_ptr()) : nullptr, w.data_ptr(), y[route].data_ptr(),
            static_cast<float*>(sum[route].data_ptr()), static_cast<float*>(sqsum[route].data_ptr()),
            route == 0 ? ops::ConvBnRoute::Fastest : ops::ConvBnRoute::Unfused);
      }
      const std::string where = "layer " + std::to_string(l.in) + "->" + std::to_string(l.out) + " k" +
                                std::to_string(l.kernel) + " s" + std::to_string(l.stride) +
                                (prologue ? " with prologue" : "");
      // bfloat16 outputs: a rounding of 2^-9 relative each, and other accumulation orders.
      EXPECT_LE(testing::worst_relative(y[0], y[1], 0.05), 3e-2) << where;
      // The statistics: per-channel mean and mean square, relative to the channel's scale. The fused
      // plan sums float32 values before their rounding to bfloat16, the composition after.
      const double count = static_cast<double>(s.batch * s.out_height() * s.out_width());
      const auto s0 = sum[0].to(Device::cpu()).to_vector<float>(), s1 = sum[1].to(Device::cpu()).to_vector<float>();
      const auto q0 = sqsum[0].to(Device::cpu()).to_vector<float>(), q1 = sqsum[1].to(Device::cpu()).to_vector<float>();
      for (std::size_t c = 0; c < s0.size(); ++c) {
        const double square = q1[c] / count;
        ASSERT_GT(square, 0.0) << where << " channel " << c;
        EXPECT_LE(std::abs(s0[c] - s1[c]) / count, 1e-2 * std::sqrt(square)) << where << " channel " << c;
        EXPECT_LE(std::abs(q0[c] - q1[c]) / count, 1e-2 * square) << where << " channel " << c;
      }
    }
  }
  print_counts("op shapes");
}

TEST(ConvBnFusionCuda, BottleneckUnderAutocastMatchesSeparateBatchNorms) {
  SUBLET_SKIP_WITHOUT_GPU("a bfloat16 channels-last Bottleneck, fused against separate batch norms");
  Generator g1(3), g2(3), data(4);
  Bottleneck fused_block(64, 16, 1, g1), plain_block(64, 16, 1, g2);
  for (Bottleneck* b : {&fused_block, &plain_block}) {
    b->to(kGpu);
    b->to(kCL);
    b->train();
  }
  const Tensor input = randn({8, 64, 14, 14}, data).to(kGpu).contiguous(kCL);
  const Tensor upstream = randn({8, 64, 14, 14}, data).to(kGpu).contiguous(kCL);
  ops::reset_conv_bn_fusion_counts();
  testing::BlockRun fused, plain;
  {
    AutocastGuard autocast(DType::BFloat16);
    fused = testing::run_block(fused_block, input, upstream, ConvBnFusion::Auto);
    plain = testing::run_block(plain_block, input, upstream, ConvBnFusion::Off);
  }
  print_counts("Bottleneck");
  EXPECT_LE(testing::worst_relative(fused.output, plain.output, 0.1), 5e-2);
  for (std::size_t i = 0; i < fused.grads.size(); ++i) {
    // Gradients through bfloat16 activations: compare against each tensor's own scale.
    double scale = 0;
    for (const float v : plain.grads[i].to(Device::cpu()).to(DType::Float32).contiguous().to_vector<float>()) {
      scale = std::max(scale, static_cast<double>(std::abs(v)));
    }
    EXPECT_LE(testing::worst_relative(fused.grads[i], plain.grads[i], 0.1 * scale + 1e-6), 5e-2) << "parameter " << i;
  }
}

// Five SGD steps of ResNet-50 (64x64 images, batch 8, bfloat16 autocast, channels-last).
std::vector<double> resnet50_losses(ConvBnFusion mode) {
  ScopedTuning scope([mode](TuningOptions& o) { o.conv_bn_fusion = mode; });
  auto model = create_model("resnet50", {.in_channels = 3, .num_classes = 10, .seed = 21});
  model->to(kGpu);
  model->to(kCL);
  model->train();
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  Generator g(22);
  const Tensor x = randn({8, 3, 64, 64}, g).to(kGpu).contiguous(kCL);
  std::vector<std::int64_t> labels(8);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 10);
  const Tensor y = Tensor::from_vector(labels, {8}).to(kGpu);
  std::vector<double> losses;
  for (int step = 0; step < 5; ++step) {
    sgd.zero_grad();
    Tensor loss;
    {
      AutocastGuard autocast(DType::BFloat16);
      loss = nn::functional::cross_entropy((*model)(x), y);
    }
    loss.backward();
    sgd.step();
    losses.push_back(loss.item<float>());
  }
  return losses;
}

TEST(ConvBnFusionCuda, ResNet50TrainsLikeSeparateBatchNormsForFiveSteps) {
  SUBLET_SKIP_WITHOUT_GPU("five ResNet-50 steps with the convolution + batch norm fusion");
  ops::reset_conv_bn_fusion_counts();
  const std::vector<double> fused = resnet50_losses(ConvBnFusion::Auto);
  print_counts("ResNet-50, 5 steps");
  EXPECT_GT(ops::conv_bn_fusion_counts().fused + ops::conv_bn_fusion_counts().unfused_no_engine, 0u)
      << "the fused chain did not run";
  const std::vector<double> plain = resnet50_losses(ConvBnFusion::Off);
  for (std::size_t i = 0; i < fused.size(); ++i) {
    std::cout << "step " << i << ": fused " << fused[i] << ", separate " << plain[i] << "\n";
    EXPECT_LE(std::abs(fused[i] - plain[i]), 1e-2) << "step " << i;
  }
}

}  // namespace
}  // namespace sublet::models
