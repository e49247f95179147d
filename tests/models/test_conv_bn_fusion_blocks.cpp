// The convolution + batch norm fusion in ResNet blocks on the CPU (SUBLET_CONV_BN_FUSION=on: the
// chain composed of the CPU kernels): the same outputs, parameter gradients and running
// statistics as the blocks with separate batch norms, and nn::functional::batch_norm_relu_conv2d's
// argument checks.
#include <gtest/gtest.h>

#include "conv_bn_fusion_checks.h"
#include "core/errors.h"
#include "models/resnet_blocks.h"
#include "runtime/factories.h"
#include "runtime/nn/conv_bn_fusion.h"
#include "runtime/nn/functional.h"

namespace sublet::models {
namespace {

using testing::run_block;
using testing::worst_relative;

// float32 throughout; the statistics come from float32 sums of squares instead of two passes.
constexpr double kTolerance = 1e-3;

void expect_same_runs(const testing::BlockRun& fused, const testing::BlockRun& plain) {
  EXPECT_LE(worst_relative(fused.output, plain.output, 1e-2), kTolerance);
  ASSERT_EQ(fused.grads.size(), plain.grads.size());
  for (std::size_t i = 0; i < fused.grads.size(); ++i) {
    EXPECT_LE(worst_relative(fused.grads[i], plain.grads[i], 1e-2), kTolerance) << "parameter " << i;
  }
  ASSERT_EQ(fused.buffers.size(), plain.buffers.size());
  for (std::size_t i = 0; i < fused.buffers.size(); ++i) {
    EXPECT_LE(worst_relative(fused.buffers[i], plain.buffers[i], 1e-2), kTolerance) << "buffer " << i;
  }
}

TEST(ConvBnFusionBlocks, BottleneckMatchesSeparateBatchNorms) {
  Generator g1(3), g2(3), data(4);
  Bottleneck fused_block(16, 4, 1, g1), plain_block(16, 4, 1, g2);
  fused_block.train();
  plain_block.train();
  const Tensor input = randn({4, 16, 6, 6}, data);
  const Tensor upstream = randn({4, 16, 6, 6}, data);
  ASSERT_TRUE(nn::conv_bn_fusion_applies(input, {fused_block.conv1.get()}, {fused_block.bn1.get()}) == false)
      << "the switch is off by default";
  const auto fused = run_block(fused_block, input, upstream, ConvBnFusion::On);
  const auto plain = run_block(plain_block, input, upstream, ConvBnFusion::Off);
  expect_same_runs(fused, plain);
}

TEST(ConvBnFusionBlocks, StridedBasicBlockWithDownsampleMatchesSeparateBatchNorms) {
  Generator g1(5), g2(5), data(6);
  BasicBlock fused_block(8, 16, 2, g1), plain_block(8, 16, 2, g2);
  fused_block.train();
  plain_block.train();
  const Tensor input = randn({3, 8, 9, 9}, data);
  const Tensor upstream = randn({3, 16, 5, 5}, data);
  expect_same_runs(run_block(fused_block, input, upstream, ConvBnFusion::On),
                   run_block(plain_block, input, upstream, ConvBnFusion::Off));
}

TEST(ConvBnFusionBlocks, AutoStaysOffTheCpuAndEvaluationStaysUnfused) {
  Generator g(7);
  BasicBlock block(4, 4, 1, g);
  const Tensor input = randn({2, 4, 5, 5}, g);
  {
    ScopedTuning scope([](TuningOptions& o) { o.conv_bn_fusion = ConvBnFusion::Auto; });
    EXPECT_FALSE(nn::conv_bn_fusion_applies(input, {block.conv1.get()}, {block.bn1.get()}));
  }
  ScopedTuning scope([](TuningOptions& o) { o.conv_bn_fusion = ConvBnFusion::On; });
  block.train();
  EXPECT_TRUE(nn::conv_bn_fusion_applies(input, {block.conv1.get()}, {block.bn1.get()}));
  block.eval();
  EXPECT_FALSE(nn::conv_bn_fusion_applies(input, {block.conv1.get()}, {block.bn1.get()}));
}

TEST(ConvBnFusionFunctional, MissingOrMisshapenSumsAreRefused) {
  Generator g(8);
  const Tensor y = randn({2, 3, 4, 4}, g), w = randn({5, 3, 1, 1}, g);
  const Tensor good = zeros({3}), wrong = zeros({4});
  namespace F = nn::functional;
  EXPECT_THROW(F::batch_norm_relu_conv2d({y, Tensor(), good}, {}, {}, {}, {}, 0.1, 1e-5, {}, w, {}, false),
               ValueError);
  try {
    F::batch_norm_relu_conv2d({y, wrong, good}, {}, {}, {}, {}, 0.1, 1e-5, {}, w, {}, false);
    FAIL() << "sums of 4 channels for a 3-channel input ran";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("input.sum must be a contiguous float32 [3]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sublet::models
