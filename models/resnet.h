#pragma once
// ResNets built from runtime/nn layers.
//
// ImageNet family (resnet18/34/50): torchvision's architecture and state-dict names (conv1, bn1,
// relu, maxpool, layer1..layer4, avgpool, fc): 7x7 stride-2 stem with 64 channels, BN, ReLU,
// 3x3 stride-2 max-pool, four stages of 64/128/256/512 planes (stride 2 from the second on),
// adaptive average pool, fc. With small_input_stem the stem is a 3x3 stride-1 conv and there is
// no max-pool (the usual CIFAR adaptation for 32x32 inputs).
//
// CIFAR family (resnet20/32/56, He et al. 2016, section 4.2): 3x3 stem with 16 channels, three
// stages of 16/32/64 planes with n = (depth - 2) / 6 basic blocks each, stride 2 at stages 2 and
// 3, 1x1 conv + BN projections where the shape changes (option B), global average pool, fc.
//
// Initialisation follows torchvision's ResNet: conv weights kaiming_normal(fan_out, ReLU gain),
// BN weight 1 / bias 0, fc PyTorch's Linear default. Everything is drawn from one Generator
// seeded by ResNetConfig::seed, so equal configs give identical models.
#include <cstdint>
#include <memory>
#include <vector>

#include "models/resnet_blocks.h"
#include "runtime/nn/flatten.h"
#include "runtime/nn/pooling.h"

namespace sublet::models {

enum class BlockKind { Basic, Bottleneck };

struct ResNetConfig {
  BlockKind block = BlockKind::Basic;
  std::vector<std::int64_t> blocks_per_stage;  // e.g. {2, 2, 2, 2}
  std::vector<std::int64_t> stage_planes;      // e.g. {64, 128, 256, 512}; one per stage
  std::int64_t stem_channels = 64;
  bool imagenet_stem = true;  // 7x7/2 conv + 3x3/2 max-pool; false: 3x3/1 conv, no pool
  std::int64_t in_channels = 3;
  std::int64_t num_classes = 1000;
  std::uint64_t seed = 0;
};

class ResNet : public nn::Module {
 public:
  explicit ResNet(const ResNetConfig& config);
  // input [N, in_channels, H, W] -> logits [N, num_classes].
  Tensor forward(const Tensor& input) override;
  // forward() = forward_head(stages(forward_stem(input))), for code that runs the stages' blocks
  // one by one (models/resnet_recompute.h measures them).
  Tensor forward_stem(const Tensor& input);
  Tensor forward_head(const Tensor& features);
  // Recompute the stem (conv1, bn1, relu, max-pool) in backward (nn::checkpoint), as the stages
  // recompute runs of blocks (nn::Sequential::set_recompute_runs).
  void set_recompute_stem(bool on);
  bool recompute_stem() const { return stem_ != nullptr; }
  const ResNetConfig& config() const { return config_; }

  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::shared_ptr<nn::ReLU> relu;
  std::shared_ptr<nn::MaxPool2d> maxpool;  // null without the ImageNet stem
  std::vector<std::shared_ptr<nn::Sequential>> stages;  // layer1, layer2, ...
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Flatten> flatten;
  std::shared_ptr<nn::Linear> fc;

 private:
  ResNetConfig config_;
  std::shared_ptr<nn::Module> stem_;  // the stem as one module, while it is recomputed
  Tensor stem_plain(const Tensor& input);
};

// torchvision's resnet18/34/50 (small_input_stem: 3x3 stride-1 stem, no max-pool).
ResNetConfig resnet18_config(std::int64_t in_channels, std::int64_t num_classes, bool small_input_stem);
ResNetConfig resnet34_config(std::int64_t in_channels, std::int64_t num_classes, bool small_input_stem);
ResNetConfig resnet50_config(std::int64_t in_channels, std::int64_t num_classes, bool small_input_stem);
// The CIFAR ResNet of the given depth (6n + 2: 20, 32, 44, 56, 110); ValueError otherwise.
ResNetConfig cifar_resnet_config(std::int64_t depth, std::int64_t in_channels, std::int64_t num_classes);

}  // namespace sublet::models
