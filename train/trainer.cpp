#include "train/trainer.h"

#include <cmath>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/errors.h"
#include "core/format_bytes.h"
#include "memory/registry.h"
#include "models/registry.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/parameter_format.h"
#include "runtime/optim/adam.h"
#include "runtime/optim/sgd.h"
#include "train/batch_upload.h"
#include "train/metrics_json.h"
#include "train/trainer_data_parallel.h"
#ifdef SUBLET_HAVE_CUDA
#include "runtime/step/graphed_train_step.h"
#endif

namespace sublet::train {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// torchvision's ResNets downsample 32x upfront with a 7x7/2 stem and a max-pool; on MNIST- and
// CIFAR-sized images that leaves almost nothing, so they get the 3x3/1 stem there.
bool wants_small_input_stem(const std::string& model, const data::ImageDataset& dataset) {
  const bool torchvision_style = model == "resnet18" || model == "resnet34" || model == "resnet50";
  return torchvision_style && dataset.height <= 32 && dataset.width <= 32;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainOptions& options, std::vector<Tensor> params, double lr) {
  if (options.optimizer == "sgd") {
    return std::make_unique<optim::SGD>(
        std::move(params), optim::SGDOptions(lr).momentum(options.momentum).weight_decay(options.weight_decay));
  }
  const optim::AdamOptions adam = optim::AdamOptions(lr).weight_decay(options.weight_decay);
  if (options.optimizer == "adamw") return std::make_unique<optim::AdamW>(std::move(params), adam);
  return std::make_unique<optim::Adam>(std::move(params), adam);
}

// The schedules are evaluated at a position, never stepped (see trainer.h): "step" counts epochs
// (x0.1 every third of the run), "cosine" counts images, so the rate falls smoothly within
// epochs and does not depend on the batch size (which an out-of-memory retry may change).
std::unique_ptr<optim::LRScheduler> make_schedule(const TrainOptions& options, optim::Optimizer& optimizer,
                                                  std::int64_t train_images) {
  if (options.schedule == "step") {
    return std::make_unique<optim::StepLR>(optimizer, std::max<std::int64_t>(1, (options.epochs + 2) / 3), 0.1);
  }
  if (options.schedule == "cosine") {
    return std::make_unique<optim::CosineAnnealingLR>(optimizer, options.epochs * train_images);
  }
  return nullptr;
}

std::int64_t count_correct(const Tensor& logits, const std::vector<std::int64_t>& labels) {
  const std::vector<std::int64_t> predicted = logits.argmax(1).to_vector<std::int64_t>();
  std::int64_t correct = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) correct += predicted[i] == labels[i] ? 1 : 0;
  return correct;
}

}  // namespace

Trainer::Trainer(TrainOptions options) : options_(std::move(options)) {
  validate(options_);
  std::optional<distributed::LaunchEnv> worker;
  if (options_.data_parallel) {
    worker = distributed::launch_env_from_process();
    device_ = worker_device(options_, *worker);
  } else {
    device_ = resolve_device(options_.device);
  }
  if (options_.cuda_graph && !device_.is_cuda()) {
    throw DeviceError("--cuda-graph needs a CUDA device (CUDA graphs exist only on the GPU); this run is on " +
                      device_.str() + (memory::cuda_built() ? "" : ", and this sublet was built without CUDA"));
  }
  data_ = load_training_data(options_);
  batch_size_ = options_.batch_size;
  manual_seed(options_.seed);  // the default generator (dropout, if a model has it) starts from the seed too
  const amp::Precision precision = amp::parse_precision(options_.precision);
  if (precision == amp::Precision::Fp16 && !device_.is_cuda())
    throw DeviceError("--precision fp16: float16 training needs a CUDA device (as PyTorch, the CPU's autocast is "
                      "bfloat16 only); this run is on " + device_.str());
  recipe_ = std::make_unique<amp::StepRecipe>(precision, device_);
  uploader_ = std::make_unique<BatchUploader>(device_);
  language_model_ = data_.tokens != nullptr;
  if (language_model_) {
    setup_language_model();
    return;
  }

  const data::ImageDataset& train = *data_.train;
  model_ = models::create_model(options_.model, {.in_channels = train.channels,
                                                 .num_classes = train.num_classes,
                                                 .small_input_stem = wants_small_input_stem(options_.model, train),
                                                 .seed = options_.seed});
  // Before the optimizer exists, so that its state is created on the device from the start.
  model_->to(device_);
  memory_format_ = options_.channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  model_->to(nn::parameter_format_for(device_, memory_format_));
  model_->train();
  const double lr = options_.lr > 0.0 ? options_.lr : default_lr(options_.optimizer);
  optimizer_ = make_optimizer(options_, model_->parameters(), lr);
  if (worker) parallel_ = make_trainer_parallel(*worker, device_, *model_, train.size(), options_);
  schedule_ = make_schedule(options_, *optimizer_, train.size());
  apply_schedule();
}

int Trainer::rank() const { return parallel_ ? parallel_->rank() : 0; }
int Trainer::world_size() const { return parallel_ ? parallel_->world_size() : 1; }

std::int64_t Trainer::images_in_shard() const {
  if (language_model_) return windows_in_interval();
  return parallel_ ? parallel_->sampler().num_samples() : data_.train->size();
}

void Trainer::sum_epoch_totals_over_ranks(std::int64_t& device_syncs) {
  if (!parallel_) return;
  double totals[] = {epoch_loss_sum_, static_cast<double>(epoch_correct_), static_cast<double>(epoch_images_),
                     static_cast<double>(epoch_timed_images_), static_cast<double>(device_syncs)};
  parallel_->sum_over_ranks(totals);
  epoch_loss_sum_ = totals[0];
  epoch_correct_ = static_cast<std::int64_t>(totals[1]);
  epoch_images_ = static_cast<std::int64_t>(totals[2]);
  epoch_timed_images_ = static_cast<std::int64_t>(totals[3]);  // all ranks' images over this rank's time
  device_syncs = static_cast<std::int64_t>(totals[4]);
}

Trainer::~Trainer() {
  // The graph (and its private pool) goes before the model and optimizer whose memory it uses.
  graphed_.reset();
  graphed_logits_ = Tensor();
}

ModelIdentity Trainer::identity() const {
  if (language_model_) {
    // in_channels 0: a language model, whose "classes" are its vocabulary.
    return {.model = options_.model, .in_channels = 0, .num_classes = data_.tokens->vocab_size,
            .small_input_stem = false, .optimizer = options_.optimizer};
  }
  const data::ImageDataset& train = *data_.train;
  return {.model = options_.model,
          .in_channels = train.channels,
          .num_classes = train.num_classes,
          .small_input_stem = wants_small_input_stem(options_.model, train),
          .optimizer = options_.optimizer};
}

std::string Trainer::describe() const {
  if (language_model_) return describe_language_model();
  const data::ImageDataset& train = *data_.train;
  std::size_t parameters = 0;
  for (const Tensor& p : model_->parameters()) parameters += static_cast<std::size_t>(p.numel());
  return fmt::format(
      "training {} ({:.2f} M parameters) on {} ({} train / {} test images of {}x{}x{}, {} classes) on {}: {} lr {} "
      "({} schedule), label smoothing {}, batch size {}, {} epoch{}, seed {}",
      options_.model, static_cast<double>(parameters) / 1e6, options_.data, train.size(), data_.test->size(),
      train.channels, train.height, train.width, train.num_classes, device_.str(), options_.optimizer,
      schedule_ ? schedule_->base_lr() : optimizer_->lr(), options_.schedule, options_.label_smoothing,
      batch_size_ > train.size()
          ? fmt::format("{} (--batch-size {} is more than the {} training images)", train.size(), batch_size_, train.size())
          : std::to_string(batch_size_),
      options_.epochs,
      options_.epochs == 1 ? "" : "s", options_.seed) + (parallel_ ? "; " + parallel_->describe() : std::string());
}

void Trainer::note(const std::string& message) const {
  if (observer_) observer_->note(message);
}

void Trainer::apply_schedule() {
  if (!schedule_) return;
  if (language_model_) {
    optimizer_->set_lr(schedule_->lr_at(schedule_position(global_step_)));
    return;
  }
  if (options_.schedule == "step") {
    optimizer_->set_lr(schedule_->lr_at(epoch_));
  } else {
    // Positions count images of all ranks (each rank has read samples_in_epoch_ of its shard).
    optimizer_->set_lr(schedule_->lr_at(epoch_ * data_.train->size() + samples_in_epoch_ * world_size()));
  }
}

void Trainer::rebuild_loader() {
  if (language_model_) return;  // the window sampler is indexed by the step
  loader_.reset();  // stops the old background thread before a new one starts
  data::LoaderOptions loader_options;
  loader_options.batch_size = batch_size_;
  loader_options.shuffle = true;
  loader_options.drop_last = options_.cuda_graph || drops_final_single_image();
  if (drops_final_single_image() && !noted_final_drop_) {
    note(fmt::format("the last training batch of each epoch would hold 1 image ({} images, batch size {}), which batch "
                     "norm cannot train on: it is dropped (as drop_last)",
                     data_.train->size(), batch_size_));
    noted_final_drop_ = true;
  }
  loader_options.seed = options_.seed;
  loader_options.normalization = data_.normalization;
  loader_options.augmentation = data_.augmentation;
  loader_options.prefetch_batches = options_.prefetch_batches;
  loader_options.buffer_allocator = loader_buffers();
  if (parallel_) {
    loader_options.epoch_indices = [this](std::int64_t epoch) {
      return parallel_->sampler().indices(static_cast<std::uint64_t>(epoch));
    };
    loader_options.indices_per_epoch = parallel_->sampler().num_samples();
  }
  loader_ = std::make_unique<data::DataLoader>(data_.train, loader_options);
  // The epoch's order does not depend on the batch size, so batch k at size b starts at image
  // k*b of the same order. When samples_in_epoch_ is not a multiple of b (an odd size halved),
  // the start rounds down: a few images are trained twice rather than skipped.
  const std::int64_t first_batch = samples_in_epoch_ / batch_size_;
  samples_in_epoch_ = first_batch * batch_size_;
  loader_->start_epoch(epoch_, first_batch);
}

void Trainer::open_epoch() {
  if (epoch_open_) return;
  reset_peak_memory_stats(device_);
  epoch_started_ = now_seconds();
  epoch_step_seconds_ = 0.0;
  epoch_timed_images_ = 0;
  epoch_timed_tokens_ = 0;
  rebuild_loader();
  model_->train();
  epoch_open_ = true;
}

Trainer::StepOutcome Trainer::forward_backward(const data::Batch& batch) {
  // Not a structured binding: the forward lambda below captures them (clang 14 refuses that).
  const std::pair<Tensor, Tensor> uploaded = uploader_->upload(batch);
  const Tensor& images = uploaded.first;
  const Tensor& labels = uploaded.second;
  optimizer_->zero_grad();
  Tensor logits;
  const Tensor loss = recipe_->forward([&] {
    logits = (*model_)(images.contiguous(memory_format_));
    return nn::functional::cross_entropy(logits, labels, options_.label_smoothing);
  });
  if (parallel_) parallel_->prepare_backward();
  recipe_->backward(loss);
  if (parallel_) {
    parallel_->finish_backward();
    parallel_->synchronize();  // the one host wait of the step, watching for a peer that died
  }
  return {.loss = loss.item<float>(), .correct = count_correct(logits.detach(), batch.labels), .images = batch.batch_size};
}

std::int64_t Trainer::pinned_uploads() const { return uploader_->pinned_uploads(); }

data::BatchBufferAllocator Trainer::loader_buffers() const {
  return options_.batch_buffer_allocator ? options_.batch_buffer_allocator : uploader_->buffer_allocator();
}

bool Trainer::drops_final_single_image() const {
  return !language_model_ && !options_.cuda_graph && batch_size_ > 1 && images_in_shard() % batch_size_ == 1;
}

std::int64_t Trainer::images_per_epoch() const {
  const std::int64_t size = images_in_shard();
  if (options_.cuda_graph) return size / batch_size_ * batch_size_;
  return drops_final_single_image() ? size - 1 : size;
}

void Trainer::check_finite_loss(float loss) const {
  if (std::isfinite(loss) || options_.allow_nonfinite) return;
  const std::int64_t step_in_epoch = (samples_in_epoch_ + batch_size_ - 1) / batch_size_ + 1;
  throw NonFiniteError(fmt::format(
      "the training loss is {} at epoch {}, step {} (global step {}), learning rate {:g}: training stopped {}{}. "
      "Lower --lr or --weight-decay, check the data, or pass --allow-nonfinite to go on",
      loss, epoch_ + 1, step_in_epoch, global_step_ + 1, optimizer_->lr(),
      options_.cuda_graph ? "after the graphed step (its update included)" : "before the optimizer step",
      options_.checkpoint.empty() ? "" : ", and the last checkpoint " + options_.checkpoint.string() + " was kept"));
}

Trainer::StepOutcome Trainer::graphed_step(const data::Batch& batch) {
#ifdef SUBLET_HAVE_CUDA
  auto [images, labels] = uploader_->upload(batch);
  if (!graphed_) {
    graphed_ = std::make_shared<GraphedTrainStep>(
        [this](const Tensor& x, const Tensor& y) {
          optimizer_->zero_grad();  // first, so that the gradients live in the graph's pool
          Tensor loss = recipe_->forward([&] {
            const Tensor logits = (*model_)(x);
            graphed_logits_ = logits.detach();  // a view: kept for the accuracy, rewritten by each replay
            return nn::functional::cross_entropy(logits, y, options_.label_smoothing);
          });
          // The update overlaps backward (fp16: backward, then a fused update that skips an inf/NaN
          // step on the device).
          recipe_->backward_and_step(loss, *optimizer_);
          return loss;
        },
        *optimizer_, images.sizes(), labels.sizes(), device_, /*warmup_steps=*/3, DType::Float32, memory_format_);
    graphed_->set_memory_plan(parse_memory_plan(options_.memory_plan));
  }
  const bool captured_before = graphed_->graphed();
  const Tensor loss = graphed_->run(images, labels);
  note_capture(captured_before);
  // item() waits for the graph's stream (a blocking stream), before `images` can be freed.
  const float value = loss.item<float>();
  graphed_->check_last_replay();  // a label out of range: the loss's error, at this step
  return {.loss = value, .correct = count_correct(graphed_logits_, batch.labels), .images = batch.batch_size};
#else
  (void)batch;
  throw DeviceError("--cuda-graph: this sublet was built without CUDA");
#endif
}

void Trainer::note_capture(bool captured_before) {
#ifdef SUBLET_HAVE_CUDA
  if (captured_before || !graphed_->graphed() || graphed_->memory_plan_report().plan != MemoryPlan::Static) return;
  const MemoryPlanReport& r = graphed_->memory_plan_report();
  note(fmt::format("static memory plan: the captured step is served from an arena of {} (its lower bound, the most "
                   "bytes live at once, is {}); {} of {} requests served from the plan{}",
                   format_bytes(static_cast<std::int64_t>(r.arena_bytes)),
                   format_bytes(static_cast<std::int64_t>(r.lower_bound_bytes)), r.served, r.requests,
                   r.abandoned.empty() ? "" : "; the capture left the plan at " + r.abandoned));
#else
  (void)captured_before;
#endif
}

std::int64_t Trainer::halve_after_oom(const OutOfMemoryError& error, std::int64_t batch_size, const std::string& what) {
  // The failed step's tensors died with the exception; gradients of a half-done backward, a graph
  // captured for the old shape and the cache they leave behind go now, so that the smaller batch
  // starts from a clean device.
  optimizer_->zero_grad();
  graphed_.reset();
  graphed_logits_ = Tensor();
  empty_cache(device_);
  if (language_model_) {
    throw OutOfMemoryError(fmt::format(
        "out of memory in the {} of {} at batch size {} x {} tokens on {}; GPT runs do not halve the batch (the "
        "window sampler is indexed by the step): restart with a smaller {}, or --precision bf16: {}",
        what, options_.model, batch_size, what == "training step" ? last_step_shape_.seq_len : seq_len_, device_.str(),
        options_.shape_schedule ? "--tokens-per-batch or MAX of --seq-len-range" : "--batch-size or --seq-len",
        error.what()));
  }
  if (parallel_) {
    // Every rank must step with the same batch size, and an out-of-memory error is one rank's:
    // refused rather than halved on one rank alone.
    throw OutOfMemoryError(fmt::format(
        "out of memory in the {} at batch size {} per rank on {} (rank {} of {}); data parallel does not halve the "
        "batch on one rank alone: restart with a smaller --batch-size (per rank) or more ranks: {}",
        what, batch_size, device_.str(), rank(), world_size(), error.what()));
  }
  if (!options_.oom_retry) {
    throw OutOfMemoryError(fmt::format("out of memory in the {} at batch size {} on {} (--oom-retry is off): {}", what,
                                       batch_size, device_.str(), error.what()));
  }
  if (batch_size <= 1) {
    throw OutOfMemoryError(fmt::format("out of memory in the {} even at batch size 1 on {}: {} does not fit; {}", what,
                                       device_.str(), options_.model, error.what()));
  }
  ++oom_retries_;
  const std::int64_t halved = batch_size / 2;
  note(fmt::format("out of memory in the {} at batch size {} (epoch {}, image {} of {}): retrying with batch size {}",
                   what, batch_size, epoch_ + 1, samples_in_epoch_, data_.train->size(), halved));
  return halved;
}

std::optional<float> Trainer::train_step() {
  open_epoch();
  if (language_model_) return language_model_step();
  for (;;) {
    const double started = now_seconds();
    std::optional<data::Batch> batch = loader_->next();
    if (!batch) return std::nullopt;
    StepOutcome outcome;
    try {
      outcome = options_.cuda_graph ? graphed_step(*batch) : forward_backward(*batch);
    } catch (const OutOfMemoryError& error) {
      batch.reset();
      batch_size_ = halve_after_oom(error, batch_size_, "training step");
      rebuild_loader();  // the same epoch, from the first image of the failed batch
      continue;
    }
    check_finite_loss(outcome.loss);
    if (!options_.cuda_graph) {
      try {
        recipe_->step(*optimizer_);
      } catch (const OutOfMemoryError& error) {
        throw OutOfMemoryError(fmt::format(
            "out of memory in the optimizer update at batch size {} (not retried: the parameters may be partly "
            "updated; resume from the last checkpoint with a smaller --batch-size): {}",
            batch_size_, error.what()));
      }
    }
    ++global_step_;
    samples_in_epoch_ += outcome.images;
    epoch_images_ += outcome.images;
    epoch_loss_sum_ += static_cast<double>(outcome.loss) * static_cast<double>(outcome.images);
    epoch_correct_ += outcome.correct;
    epoch_timed_images_ += outcome.images;
    epoch_step_seconds_ += now_seconds() - started;
    apply_schedule();
    report_step();
    return outcome.loss;
  }
}

void Trainer::report_step() {
  if (!observer_) return;
  // Counted at the current batch size: after an out-of-memory halving the total grows.
  const std::int64_t remaining = std::max<std::int64_t>(images_per_epoch() - samples_in_epoch_, 0);
  StepProgress p;
  p.epoch = epoch_ + 1;
  p.epochs = options_.epochs;
  p.batches_done = (samples_in_epoch_ + batch_size_ - 1) / batch_size_;
  p.batches_total = p.batches_done + (remaining + batch_size_ - 1) / batch_size_;
  p.mean_loss = epoch_images_ > 0 ? epoch_loss_sum_ / static_cast<double>(epoch_images_) : 0.0;
  p.img_per_s = epoch_step_seconds_ > 0 ? static_cast<double>(epoch_timed_images_) / epoch_step_seconds_ : 0.0;
  if (language_model_) {
    // One batch a step, whatever its windows; the loss is a mean over tokens.
    const std::int64_t interval_start = epoch_ * options_.eval_interval;
    p.batches_done = global_step_ - interval_start;
    p.batches_total = std::min(options_.eval_interval, options_.steps - interval_start);
    p.mean_loss = epoch_tokens_ > 0 ? epoch_loss_sum_ / static_cast<double>(epoch_tokens_) : 0.0;
    p.language_model = true;
    p.step = global_step_;
    p.steps = options_.steps;
    p.tokens_per_s = epoch_step_seconds_ > 0 ? static_cast<double>(epoch_timed_tokens_) / epoch_step_seconds_ : 0.0;
    p.step_batch = last_step_shape_.batch;
    p.step_seq_len = last_step_shape_.seq_len;
  }
  p.allocated_bytes = memory_allocated(device_);
  p.peak_allocated_bytes = max_memory_allocated(device_);
  p.reserved_bytes = memory_reserved(device_);
  p.peak_reserved_bytes = max_memory_reserved(device_);
  observer_->step_finished(p);
}

double Trainer::evaluate() {
  if (language_model_) return validation_loss();
  NoGradGuard no_grad;
  model_->eval();
  std::int64_t eval_batch = batch_size_;
  for (;;) {
    data::LoaderOptions loader_options;
    loader_options.batch_size = eval_batch;
    loader_options.shuffle = false;
    loader_options.normalization = data_.normalization;
    loader_options.prefetch_batches = options_.prefetch_batches;
    loader_options.buffer_allocator = loader_buffers();
    data::DataLoader loader(data_.test, loader_options);
    loader.start_epoch(0);
    std::int64_t correct = 0;
    try {
      while (std::optional<data::Batch> batch = loader.next()) {
        const Tensor images = uploader_->upload(*batch).first;
        // Under the training step's autocast, as PyTorch recipes evaluate.
        const Tensor logits = recipe_->forward([&] { return (*model_)(images.contiguous(memory_format_)); });
        correct += count_correct(logits, batch->labels);
      }
    } catch (const OutOfMemoryError& error) {
      // Evaluation keeps no state between batches: start over with smaller batches.
      eval_batch = halve_after_oom(error, eval_batch, "evaluation");
      continue;
    }
    model_->train();
    return data_.test->size() > 0 ? static_cast<double>(correct) / static_cast<double>(data_.test->size()) : 0.0;
  }
}

EpochMetrics Trainer::finish_epoch() {
  open_epoch();  // a resumed run may finish an epoch it has no step left in
  if (samples_in_epoch_ < images_per_epoch()) {
    throw ValueError(fmt::format("finish_epoch: epoch {} has used {} of {} training images; call train_step() until "
                                 "it returns nullopt first",
                                 epoch_ + 1, samples_in_epoch_, images_per_epoch()));
  }
  std::int64_t device_syncs = memory_stats(device_).at("num_sync_all_streams");
  sum_epoch_totals_over_ranks(device_syncs);
  EpochMetrics m;
  m.epoch = epoch_ + 1;
  m.device_syncs = device_syncs;
  m.train_loss = epoch_images_ > 0 ? epoch_loss_sum_ / static_cast<double>(epoch_images_) : 0.0;
  m.train_acc = epoch_images_ > 0 ? static_cast<double>(epoch_correct_) / static_cast<double>(epoch_images_) : 0.0;
  m.img_per_s = epoch_step_seconds_ > 0 ? static_cast<double>(epoch_timed_images_) / epoch_step_seconds_ : 0.0;
  if (language_model_) {
    m.language_model = true;
    m.train_acc = 0.0;
    m.train_loss = epoch_tokens_ > 0 ? epoch_loss_sum_ / static_cast<double>(epoch_tokens_) : 0.0;
    m.step = global_step_;
    m.val_loss = evaluate();
    m.val_perplexity = std::exp(m.val_loss);
    m.tokens_per_s = epoch_step_seconds_ > 0 ? static_cast<double>(epoch_timed_tokens_) / epoch_step_seconds_ : 0.0;
    m.tokens = epoch_tokens_;
  } else {
    m.test_acc = evaluate();
  }
  m.peak_allocated_bytes = max_memory_allocated(device_);
  m.peak_reserved_bytes = max_memory_reserved(device_);
  m.seconds = now_seconds() - epoch_started_;
  m.batch_size = batch_size_;
  history_.push_back(m);

  ++epoch_;
  samples_in_epoch_ = 0;
  epoch_loss_sum_ = 0.0;
  epoch_correct_ = 0;
  epoch_images_ = 0;
  epoch_tokens_ = 0;
  epoch_open_ = false;
  loader_.reset();
  apply_schedule();
  if (observer_) observer_->epoch_finished(m, options_.epochs);
  return m;
}

EpochMetrics Trainer::train_epoch() {
  while (train_step()) {
  }
  return finish_epoch();
}

const std::vector<EpochMetrics>& Trainer::fit() {
  if (epoch_ >= options_.epochs) {
    note(fmt::format("nothing to train: {} of {} epochs are done already", epoch_, options_.epochs));
  }
  if (!options_.memory_budget.empty() && !memory_budget_fit_) fit_memory_budget();
  RunDescription run{.model = options_.model, .device = device_.str(), .data = options_.data};
  if (const data::ShapeSchedule* s = shape_schedule())
    run.shape_schedule = ShapeScheduleSummary{.seq_len_min = s->min_len, .seq_len_max = s->max_len,
                                              .multiple = s->multiple, .tokens_per_batch = s->tokens_per_batch,
                                              .seed = s->seed, .steps = options_.steps, .eval_seq_len = seq_len_};
  while (epoch_ < options_.epochs) {
    train_epoch();
    if (rank() != 0) continue;  // rank 0 writes for all (every rank holds the same parameters)
    if (!options_.checkpoint.empty()) {
      save_checkpoint(options_.checkpoint);
      if (language_model_) {
        const std::filesystem::path weights = language_model_weights_path(options_.checkpoint);
        save_language_model_weights(weights);
        note("checkpoint written to " + options_.checkpoint.string() + ", weights for PyTorch to " + weights.string());
      } else {
        note("checkpoint written to " + options_.checkpoint.string());
      }
    }
    if (!options_.metrics_json.empty()) write_metrics_json(options_.metrics_json, run, history_);
  }
  return history_;
}

}  // namespace sublet::train
