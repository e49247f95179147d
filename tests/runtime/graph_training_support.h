#pragma once
// Shared by the GPU training tests: a seeded ResNet-20, seeded batches drawn on the host, and
// one eager training step.
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "models/registry.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/module.h"
#include "runtime/optim/optimizer.h"

namespace sublet::testing {

// Images N(0, 1) and labels uniform over `classes`, drawn on the host (the same on every device).
inline std::vector<std::pair<Tensor, Tensor>> random_batches(int count, const Shape& image_shape, std::int64_t classes,
                                                             std::uint64_t seed) {
  Generator g(seed);
  std::vector<std::pair<Tensor, Tensor>> out;
  for (int i = 0; i < count; ++i) {
    Tensor images = randn(image_shape, g);
    std::vector<std::int64_t> labels(static_cast<std::size_t>(image_shape[0]));
    for (auto& l : labels) l = static_cast<std::int64_t>(g.engine()() % static_cast<std::uint64_t>(classes));
    out.emplace_back(images, Tensor::from_vector(labels, {image_shape[0]}));
  }
  return out;
}

inline Tensor eager_step(nn::Module& model, optim::Optimizer& optimizer, const Tensor& images, const Tensor& labels) {
  optimizer.zero_grad();
  Tensor loss = nn::functional::cross_entropy(model(images), labels);
  loss.backward();
  optimizer.step();
  return loss;
}

inline std::shared_ptr<nn::Module> resnet20_on(Device device, std::uint64_t seed) {
  models::ModelOptions options;
  options.num_classes = 10;
  options.seed = seed;
  auto model = models::create_model("resnet20", options);  // initialised on the host
  model->to(device);
  model->train();
  return model;
}

}  // namespace sublet::testing
