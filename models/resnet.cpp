#include "models/resnet.h"

#include <functional>

#include "runtime/nn/checkpoint.h"

#include <cmath>
#include <string>

#include "core/errors.h"
#include "runtime/init.h"

namespace sublet::models {

namespace {

void check_config(const ResNetConfig& c) {
  if (c.blocks_per_stage.empty() || c.blocks_per_stage.size() != c.stage_planes.size()) {
    throw ValueError("ResNet: blocks_per_stage and stage_planes must be non-empty and of one length, got " +
                     std::to_string(c.blocks_per_stage.size()) + " and " + std::to_string(c.stage_planes.size()));
  }
  for (std::size_t i = 0; i < c.blocks_per_stage.size(); ++i) {
    if (c.blocks_per_stage[i] <= 0 || c.stage_planes[i] <= 0) {
      throw ValueError("ResNet: stage " + std::to_string(i + 1) + " needs a positive block count and width");
    }
  }
  if (c.stem_channels <= 0 || c.in_channels <= 0 || c.num_classes <= 0) {
    throw ValueError("ResNet: stem_channels, in_channels and num_classes must be positive, got " +
                     std::to_string(c.stem_channels) + ", " + std::to_string(c.in_channels) + ", " +
                     std::to_string(c.num_classes));
  }
}

template <typename Block>
std::shared_ptr<nn::Sequential> make_stage(std::int64_t& in_channels, std::int64_t planes, std::int64_t blocks,
                                           std::int64_t stride, Generator& generator) {
  auto stage = std::make_shared<nn::Sequential>();
  for (std::int64_t i = 0; i < blocks; ++i) {
    stage->push_back(std::make_shared<Block>(in_channels, planes, i == 0 ? stride : 1, generator));
    in_channels = planes * Block::expansion;
  }
  return stage;
}

// torchvision: nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu") on every
// conv; BN layers are already weight 1, bias 0; the fc keeps Linear's default.
void torchvision_init(nn::Module& model, Generator& generator) {
  for (auto& [name, module] : model.named_modules()) {
    if (auto* conv = dynamic_cast<nn::Conv2d*>(module)) {
      init::kaiming_normal_(conv->weight, generator, std::sqrt(2.0), init::FanMode::FanOut);
    }
  }
}

}  // namespace

ResNet::ResNet(const ResNetConfig& config) : Module("ResNet"), config_(config) {
  check_config(config);
  Generator generator(config.seed);
  const std::int64_t stem_kernel = config.imagenet_stem ? 7 : 3;
  conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(config.in_channels,
                                                                                  config.stem_channels, stem_kernel)
                                                                    .stride(config.imagenet_stem ? 2 : 1)
                                                                    .padding(stem_kernel / 2)
                                                                    .bias(false),
                                                                generator));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(config.stem_channels));
  relu = register_module("relu", std::make_shared<nn::ReLU>());
  if (config.imagenet_stem) {
    maxpool = register_module("maxpool", std::make_shared<nn::MaxPool2d>(nn::MaxPool2dOptions(3).stride(2).padding(1)));
  }
  std::int64_t channels = config.stem_channels;
  for (std::size_t i = 0; i < config.stage_planes.size(); ++i) {
    const std::int64_t stride = i == 0 ? 1 : 2;
    auto stage = config.block == BlockKind::Basic
                     ? make_stage<BasicBlock>(channels, config.stage_planes[i], config.blocks_per_stage[i], stride,
                                              generator)
                     : make_stage<Bottleneck>(channels, config.stage_planes[i], config.blocks_per_stage[i], stride,
                                              generator);
    stages.push_back(register_module("layer" + std::to_string(i + 1), stage));
  }
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(nn::AdaptiveAvgPool2dOptions(1)));
  flatten = register_module("flatten", std::make_shared<nn::Flatten>());
  fc = register_module("fc", std::make_shared<nn::Linear>(nn::LinearOptions(channels, config.num_classes), generator));
  torchvision_init(*this, generator);
}

Tensor ResNet::forward(const Tensor& input) {
  if (input.dim() != 4 || input.size(1) != config_.in_channels) {
    throw ShapeError("ResNet: expected input [N, " + std::to_string(config_.in_channels) + ", H, W], got " +
                     shape_str(input.sizes()));
  }
  Tensor x = forward_stem(input);
  for (auto& stage : stages) x = (*stage)(x);
  return forward_head(x);
}

namespace {

// The stem as one module for nn::checkpoint: its layers registered again here (not in the model's
// tree, which keeps its names), so that the recomputation sees bn1's running statistics.
class Stem : public nn::Module {
 public:
  Stem(ResNet& model, std::function<Tensor(const Tensor&)> plain) : Module("Stem"), plain_(std::move(plain)) {
    register_module("conv1", model.conv1);
    register_module("bn1", model.bn1);
    if (model.maxpool) register_module("maxpool", model.maxpool);
  }
  Tensor forward(const Tensor& input) override { return plain_(input); }

 private:
  std::function<Tensor(const Tensor&)> plain_;
};

}  // namespace

Tensor ResNet::forward_stem(const Tensor& input) { return stem_ ? nn::checkpoint(stem_, input) : stem_plain(input); }

Tensor ResNet::stem_plain(const Tensor& input) {
  Tensor x = bn1->forward_relu((*conv1)(input));  // relu(bn1(conv1(input))), fused on the GPU
  return maxpool ? (*maxpool)(x) : x;
}

void ResNet::set_recompute_stem(bool on) {
  if (!on) stem_.reset();
  else if (!stem_) stem_ = std::make_shared<Stem>(*this, [this](const Tensor& x) { return stem_plain(x); });
}

Tensor ResNet::forward_head(const Tensor& features) { return (*fc)((*flatten)((*avgpool)(features))); }

namespace {

ResNetConfig imagenet_config(BlockKind block, std::vector<std::int64_t> blocks, std::int64_t in_channels,
                             std::int64_t num_classes, bool small_input_stem) {
  ResNetConfig c;
  c.block = block;
  c.blocks_per_stage = std::move(blocks);
  c.stage_planes = {64, 128, 256, 512};
  c.stem_channels = 64;
  c.imagenet_stem = !small_input_stem;
  c.in_channels = in_channels;
  c.num_classes = num_classes;
  return c;
}

}  // namespace

ResNetConfig resnet18_config(std::int64_t in_channels, std::int64_t num_classes, bool small_input_stem) {
  return imagenet_config(BlockKind::Basic, {2, 2, 2, 2}, in_channels, num_classes, small_input_stem);
}
ResNetConfig resnet34_config(std::int64_t in_channels, std::int64_t num_classes, bool small_input_stem) {
  return imagenet_config(BlockKind::Basic, {3, 4, 6, 3}, in_channels, num_classes, small_input_stem);
}
ResNetConfig resnet50_config(std::int64_t in_channels, std::int64_t num_classes, bool small_input_stem) {
  return imagenet_config(BlockKind::Bottleneck, {3, 4, 6, 3}, in_channels, num_classes, small_input_stem);
}

ResNetConfig cifar_resnet_config(std::int64_t depth, std::int64_t in_channels, std::int64_t num_classes) {
  if (depth < 8 || (depth - 2) % 6 != 0) {
    throw ValueError("cifar ResNet: depth must be 6n + 2 with n >= 1 (20, 32, 44, 56, 110), got " +
                     std::to_string(depth));
  }
  const std::int64_t n = (depth - 2) / 6;
  ResNetConfig c;
  c.block = BlockKind::Basic;
  c.blocks_per_stage = {n, n, n};
  c.stage_planes = {16, 32, 64};
  c.stem_channels = 16;
  c.imagenet_stem = false;
  c.in_channels = in_channels;
  c.num_classes = num_classes;
  return c;
}

}  // namespace sublet::models
