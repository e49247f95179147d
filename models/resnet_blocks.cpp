#include "models/resnet_blocks.h"

namespace sublet::models {

namespace {

std::shared_ptr<nn::Conv2d> conv(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride,
                                 Generator& generator) {
  return std::make_shared<nn::Conv2d>(
      nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false), generator);
}

}  // namespace

std::shared_ptr<nn::Sequential> make_downsample(std::int64_t in_channels, std::int64_t out_channels,
                                                std::int64_t stride, Generator& generator) {
  auto downsample = std::make_shared<nn::Sequential>();
  downsample->push_back(conv(in_channels, out_channels, 1, stride, generator));
  downsample->push_back(std::make_shared<nn::BatchNorm2d>(out_channels));
  return downsample;
}

BasicBlock::BasicBlock(std::int64_t in_channels, std::int64_t planes, std::int64_t stride, Generator& generator)
    : Module("BasicBlock") {
  conv1 = register_module("conv1", conv(in_channels, planes, 3, stride, generator));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
  relu = register_module("relu", std::make_shared<nn::ReLU>());
  conv2 = register_module("conv2", conv(planes, planes, 3, 1, generator));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
  if (stride != 1 || in_channels != planes * expansion) {
    downsample = register_module("downsample", make_downsample(in_channels, planes * expansion, stride, generator));
  }
}

// relu(bn(x)) and relu(bn(x) + identity) go through BatchNorm2d::forward_relu: the same values
// as torchvision's bn, add and relu calls, one fused kernel each way on the GPU (the relu module
// stays registered, as in torchvision, but is not called).
Tensor BasicBlock::forward(const Tensor& input) {
  const Tensor out = (*conv2)(bn1->forward_relu((*conv1)(input)));
  const Tensor identity = downsample ? (*downsample)(input) : input;
  return bn2->forward_relu(out, identity);
}

Bottleneck::Bottleneck(std::int64_t in_channels, std::int64_t planes, std::int64_t stride, Generator& generator)
    : Module("Bottleneck") {
  conv1 = register_module("conv1", conv(in_channels, planes, 1, 1, generator));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
  conv2 = register_module("conv2", conv(planes, planes, 3, stride, generator));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
  conv3 = register_module("conv3", conv(planes, planes * expansion, 1, 1, generator));
  bn3 = register_module("bn3", std::make_shared<nn::BatchNorm2d>(planes * expansion));
  relu = register_module("relu", std::make_shared<nn::ReLU>());
  if (stride != 1 || in_channels != planes * expansion) {
    downsample = register_module("downsample", make_downsample(in_channels, planes * expansion, stride, generator));
  }
}

Tensor Bottleneck::forward(const Tensor& input) {
  Tensor out = bn1->forward_relu((*conv1)(input));
  out = (*conv3)(bn2->forward_relu((*conv2)(out)));
  const Tensor identity = downsample ? (*downsample)(input) : input;
  return bn3->forward_relu(out, identity);
}

}  // namespace sublet::models
