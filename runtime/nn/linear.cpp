#include "runtime/nn/linear.h"

#include <cmath>

#include "core/errors.h"
#include "runtime/autocast.h"
#include "runtime/nn/checkpoint.h"
#include "runtime/nn/functional.h"
#include "runtime/factories.h"

namespace sublet::nn {

Linear::Linear(const LinearOptions& options, Generator& generator) : Module("Linear") {
  if (options.in_features() <= 0 || options.out_features() <= 0) {
    throw ValueError("Linear: features must be positive, got in " + std::to_string(options.in_features()) +
                     ", out " + std::to_string(options.out_features()));
  }
  const double bound = 1.0 / std::sqrt(static_cast<double>(options.in_features()));
  weight = register_parameter(
      "weight", uniform({options.out_features(), options.in_features()}, -bound, bound, generator, options.dtype()));
  if (options.bias()) {
    bias = register_parameter("bias", uniform({options.out_features()}, -bound, bound, generator, options.dtype()));
  }
}

Tensor Linear::forward(const Tensor& input) { return functional::linear(input, weight, bias); }

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  auto run = recomputed_.begin();
  for (std::size_t i = 0; i < layers_.size();) {
    if (run != recomputed_.end() && run->range.first == i) {
      x = checkpoint(run->body, x);
      i = run->range.second;
      ++run;
    } else {
      x = (*layers_[i++])(x);
    }
  }
  return x;
}

void Sequential::set_recompute_runs(const std::vector<Run>& runs, const std::vector<bool>& nested) {
  if (!nested.empty() && nested.size() != runs.size())
    throw ValueError("Sequential::set_recompute_runs: " + std::to_string(nested.size()) + " nested flags for " +
                     std::to_string(runs.size()) + " runs");
  std::vector<RecomputedRun> recomputed;
  std::size_t after = 0;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const Run& r = runs[k];
    const bool nest = !nested.empty() && nested[k];
    if (r.first < after || r.first >= r.second || r.second > layers_.size() || (nest && r.second - r.first < 2))
      throw ValueError("Sequential::set_recompute_runs: run [" + std::to_string(r.first) + ", " +
                       std::to_string(r.second) + ") must be non-empty, after the previous run and within the " +
                       std::to_string(layers_.size()) + " children (two or more when nested)");
    after = r.second;
    std::shared_ptr<Module> body = layers_[r.first];
    if (r.second - r.first > 1) {
      auto run = std::make_shared<Sequential>();
      for (std::size_t i = r.first; i < r.second; ++i) {
        if (nest) run->push_back(std::make_shared<Checkpoint>(layers_[i]));
        else run->push_back(layers_[i]);
      }
      body = run;
    }
    recomputed.push_back({r, body, nest});
  }
  recomputed_ = std::move(recomputed);
}

std::vector<bool> Sequential::recompute_nested() const {
  std::vector<bool> out;
  for (const RecomputedRun& r : recomputed_) out.push_back(r.nested);
  return out;
}

std::vector<Sequential::Run> Sequential::recompute_runs() const {
  std::vector<Run> out;
  for (const RecomputedRun& r : recomputed_) out.push_back(r.range);
  return out;
}

}  // namespace sublet::nn
