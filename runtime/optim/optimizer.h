#pragma once
// Optimizers update parameters in place under NoGradGuard. Their per-parameter state (momentum
// buffers, Adam moments) is allocated lazily on a parameter's first update with the
// OptimizerState category, so memory snapshots show it apart from parameters and gradients;
// temporaries of a step are tagged Temporary. zero_grad() drops gradients (set_to_none), which
// frees their memory. state_dict()/load_state_dict() carry everything needed to resume.
//
// CUDA graphs: a step() made while the current stream captures a graph records the update
// without running it, so it advances no counts; call prepare_replay() before each replay of the
// graph: it advances the counts as step() would have and writes the learning rate and the step
// counts to device memory, where the fused kernels read them when the graph runs (a schedule
// that changes lr between replays is followed). Capturing needs the fused update and at least
// one eager step first (state tensors and the device scalars are created eagerly, never inside a
// capture, where their zero-fill would be replayed every time).
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace sublet::optim {

class Optimizer {
 public:
  using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Parameters without a gradient are skipped (and their step count does not advance).
  void step();
  void zero_grad();
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  const std::vector<Tensor>& params() const { return params_; }
  // Before each replay of a graph that captured step(): see the note at the top.
  void prepare_replay();
  std::int64_t step_count() const { return step_count_; }
  // How many updates parameter `index` has received.
  std::int64_t param_step(std::size_t index) const { return param_steps_.at(index); }

  // "lr" (0-d float64), "step_count" (0-d int64), and per parameter "<index>.step" and
  // "<index>.<key>" for each state tensor (PyTorch's optimizer.state_dict() flattened). The
  // tensors are the live state, not copies.
  NamedTensors state_dict() const;
  // Restores a state_dict of an optimizer of the same kind over parameters of the same shapes;
  // ValueError/ShapeError name the entry that does not fit. Values are copied in. The learning
  // rate comes from the state (schedules change it); other hyperparameters (betas, momentum,
  // weight decay) from this optimizer's constructor.
  void load_state_dict(const NamedTensors& entries);
  // Copies every state tensor (and the device scalars) into newly allocated memory and drops the
  // old blocks. GraphedTrainStep runs its first warm-up step in a pool it then releases: the
  // state that step creates is born among the step's activations, and moved out of them here it
  // is packed on its own instead of pinning the activations' segments for good.
  void relocate_state();
  // Bytes of the state the next step() will create (parameters without state yet, times the
  // state tensors each gets): what a memory plan made before the first step must add.
  std::size_t state_bytes_to_come() const;

 protected:
  // Updates params_[index] given its gradient; called with grad mode off.
  virtual void update(std::size_t index, Tensor& param, const Tensor& grad) = 0;
  // Updates the parameters at `indices` (those with a gradient). The default calls update() for
  // each; SGD and Adam override it with the fused multi-tensor kernels (ops/optim_update.h).
  virtual void update_params(const std::vector<std::size_t>& indices);
  // Whether the current step() is being captured into a CUDA graph.
  bool capturing() const { return capturing_; }
  // The fused kernels' device scalars, [lr, step of each parameter] (float64 on the parameters'
  // CUDA device), written for this step; nullptr for CPU parameters.
  const double* device_scalars();
  // The state tensor `key` of parameter `index`: created as zeros like the parameter (tagged
  // OptimizerState) on first use; `created` says whether that just happened.
  Tensor& state(std::size_t index, const std::string& key, bool* created = nullptr);
  const Tensor* find_state(std::size_t index, const std::string& key) const;
  // How many state tensors, each like its parameter, a parameter's first update creates.
  virtual std::size_t state_tensors_per_parameter() const { return 0; }

 private:
  std::vector<Tensor> params_;
  double lr_;
  std::int64_t step_count_ = 0;
  std::vector<std::int64_t> param_steps_;
  std::vector<std::map<std::string, Tensor>> state_;
  bool capturing_ = false;
  bool captured_ = false;
  std::vector<std::size_t> captured_indices_;  // parameters the captured step updates
  Tensor device_scalars_;
  void write_device_scalars();
};

}  // namespace sublet::optim
