#pragma once
// Training checkpoints: one safetensors file (runtime/io/safetensors.h) holding
//   tensors   "model.<state_dict name>"      the model's parameters and buffers
//             "optimizer.<state_dict name>"  lr, step counts, momentum buffers / Adam moments
//   metadata  format = "sublet-training-checkpoint", format_version = "1", and the run's
//             position and identity (TrainingPosition below), all as strings.
// Written atomically: an interrupted save leaves the previous checkpoint intact.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"
#include "train/epoch_metrics.h"

namespace sublet::train {

inline constexpr const char* kCheckpointFormat = "sublet-training-checkpoint";
inline constexpr int kCheckpointFormatVersion = 1;

// Which network the tensors belong to; loading into another one is refused by name.
// GPT models: in_channels 0 and num_classes the vocabulary size.
struct ModelIdentity {
  std::string model;
  std::int64_t in_channels = 0;
  std::int64_t num_classes = 0;
  bool small_input_stem = false;
  std::string optimizer;
  bool operator==(const ModelIdentity&) const = default;
  std::string describe() const;  // "resnet20 (1 input channel, 10 classes, optimizer sgd)"
};

// Where the run stands. Everything random in training is a function of these (the loader's
// order and augmentation of (seed, epoch, sample); the model's initialisation of the seed),
// plus the runtime's default generator, whose full state is kept as text.
struct TrainingPosition {
  std::int64_t epoch = 0;             // 0-based index of the epoch in progress
  std::int64_t samples_in_epoch = 0;  // training images of that epoch already used
  std::int64_t train_images = 0;      // size of the training set (a resume must use the same)
  std::int64_t global_step = 0;       // optimizer steps since the start of the run
  std::int64_t batch_size = 0;        // current (after any out-of-memory halving)
  std::uint64_t seed = 0;
  std::string generator_state;        // std::mt19937_64 as text (operator<<)
  // Running sums of the epoch in progress, so that its epoch line after a resume is the one an
  // uninterrupted run would print.
  double epoch_loss_sum = 0.0;        // sum over images of the loss
  std::int64_t epoch_correct = 0;
  std::int64_t epoch_images = 0;      // images trained this epoch, counting any replayed after an OOM retry
  std::vector<EpochMetrics> history;  // completed epochs
  std::int64_t planned_epochs = 0;    // --epochs of the run that wrote it (its schedule spans them); 0: unknown
  // --precision fp16: the loss scaler's scale and clean-step count (PyTorch saves scaler.state_dict()
  // beside the model's); 0: no loss scaler.
  double loss_scale = 0.0;
  std::int64_t loss_scale_growth_tracker = 0;
  // GPT runs: the tokens trained in the interval in progress, the weights of epoch_loss_sum (a
  // mean over tokens, as the windows' lengths may differ); -1 where not recorded (the sum then
  // weighs windows).
  std::int64_t epoch_tokens = -1;
  // GPT runs with a shape schedule: the schedule and a digest of the steps already trained
  // (Trainer's schedule_identity); empty for fixed windows. A resume must match it.
  std::string shape_schedule;
};

struct Checkpoint {
  ModelIdentity identity;
  TrainingPosition position;
  // The run's --precision (fp32, bf16, fp16) and memory format (contiguous, channels_last); empty
  // in checkpoints written before they were recorded. The tensors themselves are float32 master
  // weights in contiguous order either way, so a run of another precision or format resumes from
  // them by converting (load_state_dict copies into its own tensors), and says so.
  std::string precision;
  std::string memory_format;
  std::vector<std::pair<std::string, Tensor>> model_state;      // CPU tensors after loading
  std::vector<std::pair<std::string, Tensor>> optimizer_state;
};

void save_checkpoint(const std::filesystem::path& path, const Checkpoint& checkpoint);

// Throws IoError (message starts with the path) for a missing, truncated or corrupt file, a
// file that is not a sublet training checkpoint, or a format version this build cannot read.
Checkpoint load_checkpoint(const std::filesystem::path& path);

// Throws ValueError naming both sides when `found` (from a checkpoint) is not `expected`.
void check_same_model(const std::filesystem::path& path, const ModelIdentity& expected, const ModelIdentity& found);

}  // namespace sublet::train
