// Trainer::save_checkpoint and Trainer::resume_from: the Trainer's side of checkpoint.h.
#include <fmt/format.h>

#include <sstream>

#include "core/errors.h"
#include "runtime/generator.h"
#include "train/trainer.h"
#include "train/trainer_data_parallel.h"

namespace sublet::train {

void Trainer::save_checkpoint(const std::filesystem::path& path) const {
  Checkpoint checkpoint;
  checkpoint.identity = identity();
  TrainingPosition& pos = checkpoint.position;
  pos.epoch = epoch_;
  // Data parallel: the position and batch are global (all ranks), so any world size can resume.
  pos.samples_in_epoch = samples_in_epoch_ * world_size();
  pos.train_images = language_model_ ? data_.tokens->train.size() : data_.train->size();  // GPT: tokens
  pos.global_step = global_step_;
  pos.batch_size = batch_size_ * world_size();
  pos.seed = options_.seed;
  std::ostringstream generator;
  generator << default_generator().engine();
  pos.generator_state = generator.str();
  pos.epoch_loss_sum = epoch_loss_sum_;
  pos.epoch_correct = epoch_correct_;
  pos.epoch_images = epoch_images_;
  pos.history = history_;
  pos.planned_epochs = options_.epochs;
  if (language_model_) pos.epoch_tokens = epoch_tokens_;
  if (shape_schedule()) pos.shape_schedule = schedule_identity(global_step_);
  if (const amp::GradScaler* scaler = recipe_->scaler()) {
    pos.loss_scale = scaler->current_scale();
    pos.loss_scale_growth_tracker = scaler->growth_tracker();
  }
  checkpoint.precision = options_.precision;
  checkpoint.memory_format = options_.channels_last ? "channels_last" : "contiguous";
  checkpoint.model_state = model_->state_dict();
  checkpoint.optimizer_state = optimizer_->state_dict();
  train::save_checkpoint(path, checkpoint);
}

void Trainer::resume_from(const std::filesystem::path& path) {
  Checkpoint checkpoint = load_checkpoint(path);
  check_same_model(path, identity(), checkpoint.identity);
  const TrainingPosition& pos = checkpoint.position;
  const std::int64_t train_size = language_model_ ? data_.tokens->train.size() : data_.train->size();
  if (pos.train_images != train_size) {
    if (language_model_) {
      throw ValueError(fmt::format("checkpoint {} was written for a training split of {} tokens, this run has {}; pass "
                                   "the --data, --data-dir and --val-fraction of the run that wrote it",
                                   path.string(), pos.train_images, train_size));
    }
    throw ValueError(fmt::format("checkpoint {} was written for a training set of {} images, this run has {}; pass the "
                                 "--data and --limit-train of the run that wrote it",
                                 path.string(), pos.train_images, data_.train->size()));
  }
  check_resumed_schedule(path, pos);
  // Values are copied into the existing tensors, so a captured graph would stay valid; dropping
  // it anyway keeps the resumed run's first steps eager, as in the run that wrote the checkpoint.
  graphed_.reset();
  // Errors of the state dicts name the entry; prefix the file so the user knows which input is wrong.
  try {
    model_->load_state_dict(checkpoint.model_state, /*strict=*/true);
    optimizer_->load_state_dict(checkpoint.optimizer_state);
    // A checkpoint without a scale (fp32/bf16, or older) leaves an fp16 run's scaler at its start.
    if (amp::GradScaler* scaler = recipe_->scaler(); scaler && pos.loss_scale > 0.0)
      scaler->load_state(pos.loss_scale, pos.loss_scale_growth_tracker);
  } catch (const IoError&) {
    throw;
  } catch (const Error& error) {
    throw ValueError("checkpoint " + path.string() + " does not fit " + identity().describe() + ": " + error.what());
  }
  // The weights are float32 and contiguous in the file whatever the run was; load_state_dict has
  // copied them into this run's tensors, so another precision or format is a conversion: said.
  const std::string format = options_.channels_last ? "channels_last" : "contiguous";
  if (!checkpoint.precision.empty() && checkpoint.precision != options_.precision)
    note(fmt::format("the checkpoint was written by a --precision {} run; this run continues in {} (its float32 "
                     "master weights carry over as they are{})",
                     checkpoint.precision, options_.precision,
                     checkpoint.precision == "fp16" ? "; the fp16 loss scale is dropped" : ""));
  if (!checkpoint.memory_format.empty() && checkpoint.memory_format != format)
    note(fmt::format("the checkpoint was written by a {} run; its tensors are converted to this run's {} memory format",
                     checkpoint.memory_format, format));
  std::istringstream generator(pos.generator_state);
  generator >> default_generator().engine();
  if (generator.fail()) throw IoError(path.string() + ": checkpoint metadata 'generator_state' is not a generator state");

  if (pos.seed != options_.seed) {
    note(fmt::format("resuming with the checkpoint's seed {} (not --seed {}): the data order depends on it", pos.seed,
                     options_.seed));
    options_.seed = pos.seed;
  }
  if (pos.planned_epochs != 0 && pos.planned_epochs != options_.epochs && options_.schedule != "none") {
    note(fmt::format("resuming a run planned for {} epochs with --epochs {}: the {} schedule now spans {} epochs, so "
                     "the learning rate from here on differs from the original run's",
                     pos.planned_epochs, options_.epochs, options_.schedule, options_.epochs));
  }
  const std::int64_t world = world_size();
  if (pos.batch_size % world != 0) {
    throw ValueError(fmt::format("checkpoint {} was trained with a global batch of {} images, which {} ranks cannot "
                                 "share evenly; resume on a world size that divides it",
                                 path.string(), pos.batch_size, world));
  }
  if (pos.batch_size != batch_size_ * world) {
    note(world == 1 ? fmt::format("resuming with the checkpoint's batch size {} (not {})", pos.batch_size, batch_size_)
                    : fmt::format("resuming with the checkpoint's global batch {}: {} per rank on {} ranks (not {})",
                                  pos.batch_size, pos.batch_size / world, world, batch_size_));
  }
  epoch_ = pos.epoch;
  samples_in_epoch_ = pos.samples_in_epoch / world;
  global_step_ = pos.global_step;
  batch_size_ = pos.batch_size / world;
  epoch_loss_sum_ = pos.epoch_loss_sum;
  epoch_correct_ = pos.epoch_correct;
  epoch_images_ = pos.epoch_images;
  epoch_tokens_ = pos.epoch_tokens;
  if (language_model_ && pos.epoch_tokens < 0) {
    // Written when the sum weighed windows, all of seq_len tokens then: the same mean over tokens.
    epoch_tokens_ = pos.epoch_images * seq_len_;
    epoch_loss_sum_ *= static_cast<double>(seq_len_);
  }
  if (!language_model_) epoch_tokens_ = 0;
  history_ = pos.history;
  if (parallel_) parallel_->broadcast_model();  // one copy of the truth, whatever each rank read
  epoch_open_ = false;  // the next step restarts the loader at the saved position
  loader_.reset();
  apply_schedule();
  if (language_model_) {
    note(fmt::format("resumed from {} at step {} of {}", path.string(), global_step_, options_.steps));
    return;
  }
  note(fmt::format("resumed from {} at epoch {}, image {} of {} (step {})", path.string(), epoch_ + 1,
                   samples_in_epoch_, data_.train->size(), global_step_));
}

}  // namespace sublet::train
