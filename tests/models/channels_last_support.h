#pragma once
// Shared by the channels-last model tests (CPU and CUDA): a few training steps of a model in
// NCHW and of a copy converted with Module::to(ChannelsLast) fed channels-last inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "models/registry.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "runtime/optim/sgd.h"

namespace sublet::testing {

// Largest absolute difference of the logical values (NaN-propagating: fails any `<= tol`).
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto va = a.to_vector<double>();
  const auto vb = b.to_vector<double>();
  if (va.size() != vb.size()) return INFINITY;
  double worst = 0.0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    const double d = std::abs(va[i] - vb[i]);
    if (!(d <= worst)) worst = d;
  }
  return worst;
}

struct StepLosses {
  std::vector<double> nchw, channels_last;
};

// `steps` SGD steps (momentum, fused where the device has the kernel) of `name` on `device`,
// both ways, from the same initial weights and batches. `check` runs after each channels-last
// backward with the converted model (to look at layouts).
template <typename Check>
StepLosses channels_last_steps(const std::string& name, Device device, int steps, Check&& check) {
  const models::ModelOptions options{.in_channels = 3, .num_classes = 10, .seed = 11};
  auto nchw = models::create_model(name, options);
  auto cl = models::create_model(name, options);
  nchw->to(device);
  cl->to(device);
  cl->to(MemoryFormat::ChannelsLast);
  optim::SGD opt_nchw(nchw->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  optim::SGD opt_cl(cl->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  Generator g(5);
  StepLosses losses;
  for (int step = 0; step < steps; ++step) {
    const Tensor images = rand({8, 3, 16, 16}, g).to(device);
    const Tensor labels = Tensor::from_vector(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7}, {8}).to(device);
    for (bool channels_last : {false, true}) {
      nn::Module& model = channels_last ? *cl : *nchw;
      optim::SGD& opt = channels_last ? opt_cl : opt_nchw;
      opt.zero_grad();
      const Tensor x = channels_last ? images.contiguous(MemoryFormat::ChannelsLast) : images;
      const Tensor loss = nn::functional::cross_entropy(model(x), labels);
      loss.backward();
      if (channels_last) check(model);
      opt.step();
      (channels_last ? losses.channels_last : losses.nchw).push_back(loss.item<double>());
    }
  }
  return losses;
}

}  // namespace sublet::testing
