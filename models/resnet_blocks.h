#pragma once
// The residual blocks of torchvision's ResNet (torchvision/models/resnet.py), with the same
// child names so that state dicts match: conv1, bn1, conv2, bn2 (conv3, bn3), relu, downsample
// (a Sequential of a 1x1 conv "0" and a BatchNorm2d "1", present only where the shape changes).
#include <cstdint>
#include <memory>

#include "runtime/generator.h"
#include "runtime/nn/activation.h"
#include "runtime/nn/batch_norm.h"
#include "runtime/nn/conv2d.h"
#include "runtime/nn/linear.h"

namespace sublet::models {

// The 1x1 conv + BN projection shortcut (option B of He et al.; torchvision's downsample).
std::shared_ptr<nn::Sequential> make_downsample(std::int64_t in_channels, std::int64_t out_channels,
                                                std::int64_t stride, Generator& generator);

// Two 3x3 convs; out_channels = planes (expansion 1).
class BasicBlock : public nn::Module {
 public:
  static constexpr std::int64_t expansion = 1;
  BasicBlock(std::int64_t in_channels, std::int64_t planes, std::int64_t stride, Generator& generator);
  Tensor forward(const Tensor& input) override;

  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::ReLU> relu;
  std::shared_ptr<nn::Sequential> downsample;  // null when the shortcut is the identity
};

// 1x1 reduce, 3x3 (carrying the stride: torchvision's "v1.5"), 1x1 expand by 4.
class Bottleneck : public nn::Module {
 public:
  static constexpr std::int64_t expansion = 4;
  Bottleneck(std::int64_t in_channels, std::int64_t planes, std::int64_t stride, Generator& generator);
  Tensor forward(const Tensor& input) override;

  std::shared_ptr<nn::Conv2d> conv1, conv2, conv3;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2, bn3;
  std::shared_ptr<nn::ReLU> relu;
  std::shared_ptr<nn::Sequential> downsample;
};

}  // namespace sublet::models
