#pragma once
// y = x W^T + b, with PyTorch's initialisation: W and b uniform in +-1/sqrt(in_features).
// Input [..., in_features] of any rank >= 1 (GPT's [B, T, C]): functional::linear.
#include <utility>
#include <vector>

#include "runtime/generator.h"
#include "runtime/nn/module.h"

namespace sublet::nn {

class LinearOptions {
 public:
  LinearOptions(std::int64_t in_features, std::int64_t out_features) : in_(in_features), out_(out_features) {}
  LinearOptions& bias(bool value) { bias_ = value; return *this; }
  LinearOptions& dtype(DType value) { dtype_ = value; return *this; }
  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }
  bool bias() const { return bias_; }
  DType dtype() const { return dtype_; }

 private:
  std::int64_t in_, out_;
  bool bias_ = true;
  DType dtype_ = DType::Float32;
};

class Linear : public Module {
 public:
  explicit Linear(const LinearOptions& options, Generator& generator = default_generator());
  Linear(std::int64_t in_features, std::int64_t out_features) : Linear(LinearOptions(in_features, out_features)) {}
  Tensor forward(const Tensor& input) override;

  Tensor weight;  // [out_features, in_features]
  Tensor bias;    // [out_features], undefined without bias
};

// Runs its children in order.
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    register_module(std::to_string(layers_.size()), module);
    layers_.push_back(module);
    return module;
  }
  Tensor forward(const Tensor& input) override;
  std::size_t size() const { return layers_.size(); }
  const std::shared_ptr<Module>& operator[](std::size_t index) const { return layers_.at(index); }

  // Runs of children recomputed in backward (nn::checkpoint, runtime/nn/checkpoint.h): pairs
  // [begin, end), disjoint and in order, as torch.utils.checkpoint.checkpoint_sequential but with
  // runs chosen freely (models/resnet_recompute.h chooses them under a memory budget). Neither
  // the module tree nor the state dict changes. ValueError for runs out of order or range.
  // nested[i] (when given, one per run): run i's children are each checkpointed again inside its
  // recomputation, so that it keeps their outputs only (each child is then recomputed twice).
  using Run = std::pair<std::size_t, std::size_t>;
  void set_recompute_runs(const std::vector<Run>& runs, const std::vector<bool>& nested = {});
  std::vector<Run> recompute_runs() const;
  std::vector<bool> recompute_nested() const;

 private:
  std::vector<std::shared_ptr<Module>> layers_;
  struct RecomputedRun {
    Run range;
    std::shared_ptr<Module> body;  // the child, or an unregistered Sequential of the run's children
    bool nested = false;           // (each wrapped in an nn::Checkpoint)
  };
  std::vector<RecomputedRun> recomputed_;
};

}  // namespace sublet::nn
