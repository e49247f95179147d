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
//
// Loss scaling: step(SkipIfNonFinite) is the step amp::GradScaler makes. With the fused update
// (SGD/Adam fused(true), float32/float64 parameters on one device) the skip is decided on the
// device: the kernels read the found-inf flag and change nothing when it is set, and the step
// counts (per parameter, and step_count) advance in the kernels, so a skipped step leaves them
// unchanged with no host read, and the step can be captured into a CUDA graph (prepare_replay()
// then writes only lr: the replay's kernels advance the counts, or not). The host copies of the
// counts are then out of date: param_step(), step_count() and state_dict() read them back from
// the device when asked (one sync), as does the next step without loss scaling. Other optimizers
// (and the fused ones when their gradients do not fit the kernels) read the flag on the host
// (one sync) and skip or step; they cannot be captured with loss scaling (Error).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ops/optim_update.h"
#include "runtime/optim/update_scheduler.h"
#include "runtime/tensor.h"

namespace sublet::optim {

// What a loss-scaled step did, as far as the host knows. An enum, not a bool or optional<bool>:
// `if (scaler.step(opt))` would compile with either and silently mean something else.
enum class StepOutcome {
  Stepped,          // the flag was read on the host and was clear (or loss scaling is disabled)
  Skipped,          // the flag was read on the host and was set: nothing changed
  DecidedOnDevice,  // the fused kernels read the flag: nothing was read on the host
};

// What a loss-scaled step gets from amp::GradScaler: float32 [1] tensors on the parameters' device.
struct SkipIfNonFinite {
  Tensor found_inf;  // non-zero (NaN included): the step changes nothing
  Tensor inv_scale;  // optional: the gradients are still scaled; the step multiplies them by this first
};

class Optimizer {
 public:
  using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Parameters without a gradient are skipped (and their step count does not advance).
  void step();
  // The step unless skip.found_inf is set (see the note at the top), gradients unscaled by
  // skip.inv_scale first when given (and left unscaled). DecidedOnDevice when the fused kernels
  // decided (no host read: whether it stepped is known only on the device), else what happened.
  StepOutcome step(const SkipIfNonFinite& skip);
  // backward() -- which must produce this step's gradients: the model's backward -- then step(),
  // except that with an update scheduler installed (a captured step's step::StepScheduler,
  // runtime/step/scheduler.h) the scheduler may update each group of parameters as soon as
  // backward has produced their gradients, on a second stream of the graph: the update
  // (memory-bound, it reads and writes every parameter and its state) then runs beside the rest
  // of backward instead of after it, as DDP's buckets overlap their all-reduces (PyTorch users
  // know the idea as "optimizer step in backward"). The values are those of backward(); step():
  // a parameter's update reads only its own gradient, final once backward reports it
  // (autograd::BackwardObserver), and no later part of backward reads a parameter whose
  // gradient is in. Otherwise -- no scheduler, eager steps, the CPU, the per-parameter update,
  // data parallel watching the gradients (its all-reduce must come first) -- it is plain
  // backward(); step(). Loss-scaled steps need every gradient's inf/NaN check before any update:
  // call backward, then step(SkipIfNonFinite). Returns how many parameters' updates were
  // launched during backward.
  std::size_t backward_and_step(const std::function<void()>& backward);
  // Installs the scheduler backward_and_step hands its step to (null: none); returns the one
  // installed before. step::StepSchedulerScope installs it for one captured step.
  UpdateScheduler* set_update_scheduler(UpdateScheduler* scheduler) {
    UpdateScheduler* previous = update_scheduler_;
    update_scheduler_ = scheduler;
    return previous;
  }

  // One captured step's update, overlapped with backward by an UpdateScheduler: when and on
  // which stream each group goes is the scheduler's; how a group is updated is the optimizer's.
  // Made while the step is being captured; the step's flags are cleared when it ends.
  class OverlappedUpdate {
   public:
    explicit OverlappedUpdate(Optimizer& optimizer);
    ~OverlappedUpdate();
    OverlappedUpdate(const OverlappedUpdate&) = delete;
    OverlappedUpdate& operator=(const OverlappedUpdate&) = delete;

    // Whether launch() can update these parameters (their gradients final) on another stream:
    // the fused update reads the gradients where they are. A gradient in another layout than
    // its parameter's would be copied on the capture's stream first, and that copy would go
    // back to the allocator while the other stream may still read it.
    bool can_launch(const std::vector<std::size_t>& indices) const;
    // Enqueues their update on `lane` (its workspaces held as `lane` says).
    void launch(const std::vector<std::size_t>& indices, const ops::Context& lane);
    // After backward: updates every parameter not launched yet that has a gradient (the last
    // group, groups that could not go, gradients from before this backward), on the parameters'
    // current stream, and records the captured step. Returns how many were launched before.
    std::size_t finish();

   private:
    Optimizer& optimizer_;
    std::vector<std::size_t> launched_;
  };
  void zero_grad();
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  const std::vector<Tensor>& params() const { return params_; }
  // Before each replay of a graph that captured step(): see the note at the top.
  void prepare_replay();
  // Steps taken (skipped ones not counted). Reads the device's count after device-decided steps.
  std::int64_t step_count() const;
  // How many updates parameter `index` has received (read back as step_count()).
  std::int64_t param_step(std::size_t index) const;

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
  // state tensors each gets, each rounded up as the allocator rounds its block): what a memory
  // plan made before the first step must add.
  std::size_t state_bytes_to_come() const;

 protected:
  // Updates params_[index] given its gradient; called with grad mode off.
  virtual void update(std::size_t index, Tensor& param, const Tensor& grad) = 0;
  // Updates the parameters at `indices` (those with a gradient). The default calls update() for
  // each; SGD and Adam override it with the fused multi-tensor kernels (ops/optim_update.h).
  virtual void update_params(const std::vector<std::size_t>& indices);
  // Whether the current step() is being captured into a CUDA graph.
  bool capturing() const { return capturing_; }
  // Whether the fused kernels can make the step on these parameters: then step(SkipIfNonFinite)
  // leaves the skip to them (update_params with device_skip() set). SGD and Adam with fused(true).
  virtual bool fused_update_usable(const std::vector<std::size_t>& indices) const;
  // During update_params of a step whose skip the device decides, its flag and inverse scale; else null.
  const SkipIfNonFinite* device_skip() const { return device_skip_; }
  // The fused kernels' scalars for this step: lr and, on CUDA or when the device decides the skip,
  // the device array [lr, step of each parameter, step_count] (float64 on the parameters'
  // device) with device_skip()'s flag, inverse scale and advance_counts.
  ops::UpdateScalars fused_scalars();
  // The state tensor `key` of parameter `index`: created as zeros like the parameter (tagged
  // OptimizerState) on first use; `created` says whether that just happened.
  Tensor& state(std::size_t index, const std::string& key, bool* created = nullptr);
  const Tensor* find_state(std::size_t index, const std::string& key) const;
  // How many state tensors, each like its parameter, a parameter's first update creates.
  virtual std::size_t state_tensors_per_parameter() const { return 0; }
  // Where the fused kernels launch: `fused` (the parameters' device, its current stream), or the
  // update's own stream while an OverlappedUpdate launches a group.
  ops::Context launch_context(const ops::Context& fused) const { return overlap_context_ ? *overlap_context_ : fused; }

 private:
  std::vector<Tensor> params_;
  double lr_;
  mutable std::int64_t step_count_ = 0;
  mutable std::vector<std::int64_t> param_steps_;
  std::vector<std::map<std::string, Tensor>> state_;
  bool capturing_ = false;
  bool captured_ = false;
  std::vector<std::size_t> captured_indices_;  // parameters the captured step updates
  bool captured_on_device_ = false;            // the captured step's counts advance on the device
  const SkipIfNonFinite* device_skip_ = nullptr;
  const ops::Context* overlap_context_ = nullptr;  // set while an OverlappedUpdate launches a group
  UpdateScheduler* update_scheduler_ = nullptr;
  // Where the counts are current: at least one of the two always is. Host: step_count_ and
  // param_steps_. Device: device_scalars_ (whose counts the kernels advance after device-decided steps).
  mutable bool host_counts_current_ = true;
  bool device_counts_current_ = false;
  Tensor device_scalars_;  // [lr, param_steps_..., step_count_]
  // Clears the flags a step sets (capturing_, device_skip_, overlap_context_) when it ends,
  // however it ends.
  struct StepFlagsReset {
    Optimizer& optimizer;
    ~StepFlagsReset() {
      optimizer.capturing_ = false;
      optimizer.device_skip_ = nullptr;
      optimizer.overlap_context_ = nullptr;
    }
  };
  StepOutcome run_step(const SkipIfNonFinite* skip);
  void record_captured_step(std::vector<std::size_t> indices, bool counts_on_device);
  double* device_scalars(bool for_cpu);
  // Writes lr, and the counts too when `with_counts`.
  void write_device_scalars(bool with_counts);
  void refresh_host_counts() const;  // reads the device's counts when the host's are out of date
  void check_skip_tensors(const SkipIfNonFinite& skip) const;
};

}  // namespace sublet::optim
