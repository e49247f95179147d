#pragma once
// The training loop behind `sublet train`, as a library:
//
//   train::Trainer trainer(options);           // data, model on the device, optimizer, schedule
//   trainer.set_observer(&progress_printer);
//   if (!options.resume.empty()) trainer.resume_from(options.resume);
//   trainer.fit();                             // epochs; checkpoint and metrics after each
//
// or step by step (tests): train_step() until it returns nullopt, then finish_epoch().
//
// Exact resume: everything random in a step is a function of the seed and the position
// (epoch, images of the epoch used): the loader's order and augmentation are, the learning rate
// is (the schedule is evaluated at the position, never stepped), and the runtime's default
// generator is saved whole. A run resumed from a checkpoint therefore computes the same losses,
// bit for bit on the CPU, as one that never stopped.
//
// Out of memory: a step whose forward or backward throws OutOfMemoryError is undone (its
// tensors and gradients released, the cache emptied), the batch size is halved, the loader
// restarts at the same image of the same epoch, and the step is tried again; at batch size 1
// the error is final. An OutOfMemoryError inside the optimizer update is not retried: the
// parameters may be half updated then.
//
// GPT models (--data text|tokens, train_options.h): the same loop, checkpoints and metrics over
// random token windows; an "epoch" is one evaluation interval (eval_interval steps), evaluate()
// gives the validation loss, and batch `k` of the run is the sampler's batch k (a function of the
// seed and the step), so a resumed run sees the same windows. No out-of-memory halving there.
// With a shape schedule (TrainOptions::shape_schedule) step k trains on the schedule's entry k
// (its batch of windows of its length), the learning rate is evaluated at the tokens trained
// before the step, the train loss is a mean over tokens, and a resume must bring the schedule
// that gave the steps already trained their shapes.
//
// --cuda-graph (CUDA only): the step (zero_grad, forward, loss, backward, optimizer step; GPT
// runs clip the gradients before the step) runs through runtime/step/graphed_train_step.h: three
// eager warm-up steps, then one capture, then replays; the learning rate the schedule sets between
// steps is written to the device before each replay. A graph has fixed shapes, so the training
// loader drops each epoch's short last batch in that mode, an out-of-memory retry captures a new
// graph at the halved batch size, and GPT runs take it without a shape schedule only.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/errors.h"
#include "runtime/amp/step_recipe.h"
#include "runtime/data/loader.h"
#include "runtime/data/shape_schedule.h"
#include "runtime/nn/module.h"
#include "runtime/optim/lr_scheduler.h"
#include "runtime/optim/optimizer.h"
#include "train/checkpoint.h"
#include "train/data_setup.h"
#include "train/epoch_metrics.h"
#include "train/train_options.h"
#include "train/training_observer.h"

namespace sublet {
class GraphedTrainStep;  // runtime/step/graphed_train_step.h, compiled with CUDA only
}

namespace sublet::train {

class BatchUploader;    // train/batch_upload.h
class TrainerParallel;  // train/trainer_data_parallel.h

// "run/gpt.safetensors" -> "run/gpt.weights.safetensors" ("run/gpt.ckpt" -> "run/gpt.ckpt.weights.safetensors").
std::filesystem::path language_model_weights_path(const std::filesystem::path& checkpoint);

class Trainer {
 public:
  // Validates the options, loads the data, builds the model (on the device) and the optimizer.
  // Throws ValueError for bad options, IoError for missing data, DeviceError for a missing GPU.
  explicit Trainer(TrainOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Batches uploaded asynchronously from pinned host memory (CUDA runs; 0 elsewhere).
  std::int64_t pinned_uploads() const;

  // Not owned; may be null. Receives step progress, epoch metrics and notes.
  void set_observer(TrainingObserver* observer) { observer_ = observer; }

  // Continues from a checkpoint of save_checkpoint: model, optimizer, position, batch size,
  // default generator, epoch history. ValueError naming the mismatch for a checkpoint of another
  // model, optimizer or training-set size; IoError for a corrupt file.
  void resume_from(const std::filesystem::path& path);
  void save_checkpoint(const std::filesystem::path& path) const;
  // GPT runs: the model alone under nanoGPT's names (models/gpt_export.h), which PyTorch loads with
  // load_state_dict(strict=True). fit() writes it beside each checkpoint, at
  // language_model_weights_path(checkpoint).
  void save_language_model_weights(const std::filesystem::path& path) const;

  // One optimizer step on the next batch of the epoch in progress: its loss, or nullopt when the
  // epoch has no batch left (then call finish_epoch()).
  std::optional<float> train_step();
  // Evaluates, records and returns the metrics of the epoch in progress (whose batches must be
  // used up) and moves to the next epoch.
  EpochMetrics finish_epoch();
  // The remaining steps of the epoch in progress, then finish_epoch().
  EpochMetrics train_epoch();
  // Test-set accuracy in [0, 1] (GPT models: the validation loss in nats, over eval_batches
  // batches), in eval mode without recording a graph.
  double evaluate();
  // GPT models: the training window length (--seq-len, or the model's context), with a shape
  // schedule the evaluation's fixed one; 0 otherwise.
  std::int64_t seq_len() const { return seq_len_; }
  // GPT runs with a shape schedule; null otherwise.
  const data::ShapeSchedule* shape_schedule() const { return options_.shape_schedule.get(); }
  // GPT runs: the windows and window length of optimizer step `step` (0-based): the schedule's
  // entry, or batch_size() x seq_len() without one.
  data::ShapeStep step_shape(std::int64_t step) const;
  bool language_model() const { return language_model_; }
  // Epochs until options.epochs are complete; after each, the checkpoint and the metrics file
  // when the options name them. Returns the whole history (resumed epochs included).
  const std::vector<EpochMetrics>& fit();

  // "resnet20 on mnist (2000 train / 1000 test images of 1x28x28, 10 classes), cpu, sgd lr 0.1 ..."
  std::string describe() const;

  nn::Module& model() { return *model_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  Device device() const { return device_; }
  const TrainOptions& options() const { return options_; }
  const TrainingData& data() const { return data_; }
  ModelIdentity identity() const;
  std::int64_t epoch() const { return epoch_; }  // 0-based epoch in progress
  std::int64_t samples_in_epoch() const { return samples_in_epoch_; }
  std::int64_t global_step() const { return global_step_; }
  std::int64_t batch_size() const { return batch_size_; }
  std::int64_t oom_retries() const { return oom_retries_; }
  const std::vector<EpochMetrics>& history() const { return history_; }
  // --memory-budget, once fit() has measured it: the budget in bytes and the unbudgeted step's
  // peak it was resolved against (a fraction's base). The training steps peak within the budget.
  struct MemoryBudgetFit {
    std::size_t budget_bytes = 0;
    std::size_t baseline_peak = 0;
  };
  const std::optional<MemoryBudgetFit>& memory_budget_fit() const { return memory_budget_fit_; }
  // Data parallel: this process's rank and the world size (0 and 1 otherwise). Only rank 0
  // writes checkpoints and metrics; the CLI prints progress on rank 0 only.
  int rank() const;
  int world_size() const;

 private:
  struct StepOutcome {
    float loss = 0.0f;
    std::int64_t correct = 0;
    std::int64_t images = 0;
  };

  // GPT models (train/trainer_language_model.cpp): model, optimizer groups and schedule; one
  // step on the sampler's batch for global_step_; the validation loss; windows per interval.
  void setup_language_model();
  std::optional<float> language_model_step();
  // The GPT step's loss: forward and backward (eager), or the whole step replayed (graph mode:
  // clipping and the update included); the inputs are the sampler's batch.
  float language_model_forward_backward(const Tensor& inputs, const Tensor& targets);
  float language_model_graphed_step(const Tensor& inputs, const Tensor& targets);
  // Clipping (--grad-clip, after unscaling an fp16 run's gradients) and the optimizer step.
  void clip_and_step();
  double validation_loss();
  std::int64_t windows_in_interval() const;
  std::string describe_language_model() const;
  // The learning-rate schedule's position before step `step`: the step, or with a shape schedule
  // the tokens of the steps before it (all the run's tokens past its last step).
  std::int64_t schedule_position(std::int64_t step) const;
  // The schedule and a digest of its first `steps_done` entries, as checkpoints record it:
  // "seq 8..64 (multiples of 8), about 256 tokens per step; seed 3; steps 0..39 digest 0123abcd".
  std::string schedule_identity(std::int64_t steps_done) const;
  // Refuses a checkpoint whose steps were trained with other shapes than this run's schedule gives.
  void check_resumed_schedule(const std::filesystem::path& path, const TrainingPosition& position) const;

  void open_epoch();
  void rebuild_loader();
  void apply_schedule();
  // Forward and backward (eager mode; the optimizer step follows), or the whole step (graph mode).
  StepOutcome forward_backward(const data::Batch& batch);
  StepOutcome graphed_step(const data::Batch& batch);
  // After a graph-mode step: the static memory plan's note, once, when that step captured.
  void note_capture(bool captured_before);
  // Images of the epoch a loader serves at the current batch size (graph mode drops a short
  // last batch, eager mode a last batch of one image).
  std::int64_t images_per_epoch() const;
  // A final batch of a single image: batch norm cannot train on it (one value per channel at a
  // 1x1 spatial size), and its error would come after the whole epoch's work. Dropped instead.
  bool drops_final_single_image() const;
  // Throws NonFiniteError naming the epoch, step and learning rate unless --allow-nonfinite.
  void check_finite_loss(float loss) const;
  // The options' buffer allocator if set, else the uploader's (pinned on CUDA).
  data::BatchBufferAllocator loader_buffers() const;
  // Releases what the failed step left, halves batch_size_ (or throws when it cannot); `what`
  // says where ("training step", "evaluation") for the messages.
  std::int64_t halve_after_oom(const OutOfMemoryError& error, std::int64_t batch_size, const std::string& what);
  void report_step();
  void note(const std::string& message) const;
  // --memory-budget: measures the blocks on a random batch and sets the ResNet's recompute runs
  // (models/resnet_recompute.h), once, before the first step of fit().
  void fit_memory_budget();
  std::optional<MemoryBudgetFit> memory_budget_fit_;
  // Training images one epoch serves this process: the dataset, or this rank's shard of it.
  std::int64_t images_in_shard() const;
  // Epoch totals (and `device_syncs`) summed over ranks (data parallel) for the epoch's metrics.
  void sum_epoch_totals_over_ranks(std::int64_t& device_syncs);

  TrainOptions options_;
  Device device_;
  TrainingData data_;
  std::shared_ptr<nn::Module> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LRScheduler> schedule_;
  std::unique_ptr<data::DataLoader> loader_;
  std::unique_ptr<BatchUploader> uploader_;
  std::unique_ptr<TrainerParallel> parallel_;  // data parallel only
  // How each step runs: autocast and loss scaling for --precision bf16/fp16.
  std::unique_ptr<amp::StepRecipe> recipe_;
  MemoryFormat memory_format_ = MemoryFormat::Contiguous;  // --channels-last: the batches' and model's
  TrainingObserver* observer_ = nullptr;
  bool language_model_ = false;
  std::int64_t seq_len_ = 0;
  std::unique_ptr<data::RandomWindowSampler> token_sampler_;
  std::vector<std::int64_t> tokens_before_;  // shape schedule: tokens of steps [0, k) for k = 0..steps
  data::ShapeStep last_step_shape_;          // the windows of the last step trained, as its input held them
  // shared_ptr: its deleter is bound where the step is made (CUDA builds only), so CPU builds can
  // hold and reset it without the complete type.
  std::shared_ptr<GraphedTrainStep> graphed_;  // graph mode, created at the first step
  Tensor graphed_logits_;                      // the step's logits (static in the graph's pool)

  // Position (what a checkpoint saves).
  std::int64_t epoch_ = 0;
  std::int64_t samples_in_epoch_ = 0;
  std::int64_t global_step_ = 0;
  std::int64_t batch_size_ = 0;
  double epoch_loss_sum_ = 0.0;      // sum over the epoch's trained images of their loss
  std::int64_t epoch_correct_ = 0;
  std::int64_t epoch_images_ = 0;    // trained images, counting any replayed after an OOM retry
  std::int64_t epoch_tokens_ = 0;    // GPT runs: trained tokens, the weights of epoch_loss_sum_
  std::vector<EpochMetrics> history_;

  // This process's view of the epoch in progress (not saved: wall-clock time).
  bool epoch_open_ = false;
  double epoch_step_seconds_ = 0.0;
  std::int64_t epoch_timed_images_ = 0;
  std::int64_t epoch_timed_tokens_ = 0;  // GPT runs
  double epoch_started_ = 0.0;       // seconds on the steady clock
  std::int64_t oom_retries_ = 0;
  bool noted_final_drop_ = false;
};

}  // namespace sublet::train
