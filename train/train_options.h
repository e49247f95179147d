#pragma once
// Everything `sublet train` can be told, as one struct with the CLI's defaults, and the checks
// that turn a bad value into one ValueError naming the flag (the CLI prints it and exits 1).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "runtime/data/batch_buffer.h"

namespace sublet::data {
struct ShapeSchedule;  // runtime/data/shape_schedule.h
}

namespace sublet::train {

struct TrainOptions {
  std::string model = "resnet20";       // models::model_names()
  std::string data = "mnist";           // mnist | cifar10 | synthetic (images); text | tokens (GPT models)
  std::filesystem::path data_dir;       // empty: default_data_dir(data)
  std::string device = "auto";          // auto (CUDA when present) | cpu | cuda | cuda:N
  // 30: at 10 epochs ResNet-20's test accuracy on the 8,000 MNIST digits still depends on the
  // seed and the precision; at 30 every seed and precision settles (docs/training.md, "Accuracy").
  std::int64_t epochs = 30;
  std::int64_t batch_size = 64;
  double lr = 0.0;                      // 0: default_lr(optimizer)
  std::string optimizer = "sgd";        // sgd | adam | adamw
  std::string schedule = "cosine";      // none | step | cosine
  double momentum = 0.9;                // SGD only
  double weight_decay = 5e-4;
  // Cross-entropy target smoothing in [0, 1). 0.1 as in torchvision's training recipes; it raises
  // ResNet-20's test accuracy on the 8,000 MNIST digits.
  double label_smoothing = 0.1;
  std::int64_t limit_train = 0;         // use the first N training images; 0: all
  std::int64_t limit_test = 0;          // use the first N test images; 0: all
  std::uint64_t seed = 0;               // model initialisation, shuffling, augmentation
  std::filesystem::path checkpoint;     // written after every epoch when set
  std::filesystem::path resume;         // checkpoint to continue from when set
  std::filesystem::path metrics_json;   // written after every epoch when set
  bool cuda_graph = false;              // replay the training step from a CUDA graph (CUDA only)
  std::string memory_plan = "static";   // with cuda_graph: static | cached (runtime/step/memory_plan.h)
  std::string memory_budget;            // empty: none; else memory::parse_memory_budget's text
  bool oom_retry = true;                // halve the batch size on OutOfMemoryError
  bool allow_nonfinite = false;         // go on after a NaN or infinite loss (default: stop with an error)
  std::int64_t prefetch_batches = 2;    // batches the loader thread prepares ahead
  // Data parallel (train/trainer_data_parallel.h): set for a worker process, which reads its
  // rank from torchrun's variables; batch_size is then per rank (global batch = batch_size x
  // world size), as with PyTorch's DDP.
  bool data_parallel = false;
  double bucket_cap_mb = 25;            // gradient bucket size of the all-reduce (MiB, fractions allowed)
  std::string backend = "auto";         // auto (NCCL on CUDA, Gloo on the CPU) | nccl | gloo
  // Bounds every wait of the group: joining, store operations, collectives (as PyTorch's
  // init_process_group timeout; its default for NCCL is 10 min, sublet's is shorter).
  double dist_timeout_s = 60.0;
  bool sync_batch_norm = false;         // batch statistics over all ranks (runtime/nn/sync_batch_norm.h)
  // Mixed precision (runtime/amp/step_recipe.h): fp32 | bf16 | fp16 (autocast, float32 master
  // weights; fp16 with loss scaling). channels_last: model and batches in NHWC memory format.
  std::string precision = "fp32";
  bool channels_last = false;

  // Synthetic data only: image shape and split sizes (limit_train/limit_test override the sizes).
  std::int64_t synthetic_channels = 3;
  std::int64_t synthetic_height = 32;
  std::int64_t synthetic_width = 32;
  std::int64_t synthetic_train_size = 10000;
  std::int64_t synthetic_test_size = 2000;

  // GPT models (models::is_language_model) train on token windows for a number of optimizer steps
  // instead of epochs: every eval_interval steps (and after the last) the validation loss is
  // measured, the checkpoint and the metrics written (each such interval counts as one "epoch" of
  // the shared loop, checkpoint and metrics). AdamW's betas are nanoGPT's (0.9, 0.95), its weight
  // decay applies to 2-D weights only, the cosine schedule starts with a linear warm-up, and the
  // gradients are clipped to a global norm of grad_clip. use_language_model_defaults() sets the
  // defaults that differ from the image models'.
  std::int64_t seq_len = 0;             // tokens per window (block size); 0: the model's context
  // Variable lengths (runtime/data/shape_schedule.h; the CLI's --seq-len-range/--tokens-per-batch,
  // drawn from the seed, or --shape-schedule): step k trains on entry k's batch x seq_len, and the
  // learning-rate schedule counts the tokens trained rather than the steps. seq_len is then 0: the
  // evaluation keeps fixed windows of the model's context, max(1, tokens_per_batch / context) a
  // batch. Null: every step is batch_size x seq_len.
  std::shared_ptr<const data::ShapeSchedule> shape_schedule;
  std::int64_t steps = 2000;            // optimizer steps in all
  std::int64_t eval_interval = 250;     // steps between evaluations
  std::int64_t eval_batches = 20;       // validation batches per evaluation (0: the whole split)
  std::int64_t warmup_steps = -1;       // linear warm-up of the cosine schedule; -1: min(100, steps / 10)
  double grad_clip = 1.0;               // global gradient norm limit; 0: no clipping
  double validation_fraction = 0.1;     // the end of a single text or token file kept for validation

  // Where batch images are prepared; empty: pageable host memory. The slot where a pinned
  // host allocator goes for asynchronous host-to-device copies on CUDA.
  data::BatchBufferAllocator batch_buffer_allocator{};
};

// More would overflow the schedules' epochs x images count long before anyone waits for them.
inline constexpr std::int64_t kMaxEpochs = 1'000'000;

std::vector<std::string> dataset_names();
std::vector<std::string> optimizer_names();
std::vector<std::string> schedule_names();

// The learning rate used when TrainOptions::lr is 0: 0.1 for SGD (with momentum 0.9, as the
// ResNet papers), 1e-3 for Adam and AdamW.
double default_lr(const std::string& optimizer);

// data/mnist and data/cifar-10-batches-bin, relative to the current directory; empty for
// synthetic data, which needs no files.
std::filesystem::path default_data_dir(const std::string& data);

// The defaults of a GPT run where they differ from the image models' (nanoGPT's): optimizer adamw,
// weight decay 0.1, no label smoothing, batch size 16. `given(flag)` says whether the user set the
// flag ("--optimizer", "--weight-decay", "--label-smoothing", "--batch-size", "--data"); those are kept.
// --data becomes text when it was not given. Does nothing for an image model.
template <class Given>
void use_language_model_defaults(TrainOptions& options, Given&& given);

// True for a GPT model (token windows, steps and evaluations of the validation loss).
bool is_language_model_run(const TrainOptions& options);
// The warm-up of the schedule (warmup_steps resolved).
std::int64_t warmup_steps_of(const TrainOptions& options);
// Evaluations of a language-model run: ceil(steps / eval_interval).
std::int64_t evaluations_of(const TrainOptions& options);

// Throws ValueError naming the flag and the allowed values for the first bad option (unknown
// model/data/optimizer/schedule/device text, non-positive or absurdly large epochs or batch
// size, negative limits or lr). Does not touch files or devices (--cuda-graph without a GPU is
// the Trainer's DeviceError).
void validate(const TrainOptions& options);

// The device the options ask for: auto is cuda:0 when a GPU is present, else the CPU. Throws
// DeviceError when CUDA is asked for and there is none (not built, or no device).
Device resolve_device(const std::string& text);

template <class Given>
void use_language_model_defaults(TrainOptions& options, Given&& given) {
  if (!is_language_model_run(options)) return;
  if (!given("--optimizer")) options.optimizer = "adamw";
  if (!given("--weight-decay")) options.weight_decay = 0.1;
  if (!given("--label-smoothing")) options.label_smoothing = 0.0;
  if (!given("--batch-size")) options.batch_size = 16;
  if (!given("--data")) options.data = "text";
}

}  // namespace sublet::train
