// The Trainer's GPT side (trainer.h): nanoGPT's optimizer setup and schedule, one step on a
// batch of random token windows (of a fixed length, or of the shape schedule's; with --cuda-graph
// a captured step replayed), and the validation loss. The loop, checkpoints, metrics and progress
// are the Trainer's own, shared with the image models.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/errors.h"
#include "models/gpt.h"
#include "models/gpt_export.h"
#include "models/registry.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/nn/clip_grad.h"
#include "runtime/nn/functional.h"
#include "runtime/optim/adam.h"
#include "runtime/optim/sgd.h"
#include "train/trainer.h"
#ifdef SUBLET_HAVE_CUDA
#include "runtime/step/graphed_train_step.h"
#endif

namespace sublet::train {
namespace {

namespace F = nn::functional;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Next-token cross-entropy of logits [B, T, V] against targets [B, T]: the mean over B x T.
Tensor next_token_loss(const Tensor& logits, const Tensor& targets) {
  return F::cross_entropy(logits, targets, F::CrossEntropyFuncOptions());
}

// nanoGPT's configure_optimizers: weight decay on the 2-D tensors (matmul weights, embeddings)
// only, betas (0.9, 0.95).
std::unique_ptr<optim::Optimizer> make_language_model_optimizer(const TrainOptions& options, models::GPT& model,
                                                                double lr) {
  if (options.optimizer == "sgd") {
    return std::make_unique<optim::SGD>(
        model.parameters(), optim::SGDOptions(lr).momentum(options.momentum).weight_decay(options.weight_decay));
  }
  std::vector<optim::AdamParamGroup> groups = {{model.decay_parameters(), options.weight_decay},
                                               {model.no_decay_parameters(), 0.0}};
  const optim::AdamOptions adam = optim::AdamOptions(lr).betas(0.9, 0.95).weight_decay(options.weight_decay);
  if (options.optimizer == "adamw") return std::make_unique<optim::AdamW>(std::move(groups), adam);
  return std::make_unique<optim::Adam>(std::move(groups), adam);
}

}  // namespace

std::filesystem::path language_model_weights_path(const std::filesystem::path& checkpoint) {
  std::filesystem::path out = checkpoint;
  if (out.extension() == ".safetensors") out.replace_extension();
  out += ".weights.safetensors";
  return out;
}

void Trainer::save_language_model_weights(const std::filesystem::path& path) const {
  const auto& gpt = dynamic_cast<const models::GPT&>(*model_);
  models::save_gpt_weights(path, gpt, options_.model,
                           {{"step", std::to_string(global_step_)}, {"data", data_.tokens->name}});
}

void Trainer::setup_language_model() {
  const data::TokenDataset& tokens = *data_.tokens;
  model_ = models::create_model(options_.model, {.vocab_size = tokens.vocab_size, .seed = options_.seed});
  auto& gpt = dynamic_cast<models::GPT&>(*model_);
  const std::int64_t context = gpt.config().block_size;
  seq_len_ = options_.seq_len > 0 ? options_.seq_len : context;
  if (seq_len_ > context) {
    throw ValueError(fmt::format("--seq-len {} is longer than {}'s context of {} tokens (its position embeddings)",
                                 seq_len_, options_.model, context));
  }
  if (const data::ShapeSchedule* schedule = shape_schedule()) {
    // validate() checked the schedule against the context and --steps; the evaluation keeps its
    // windows at the context, as many as hold about a training step's tokens.
    batch_size_ = std::max<std::int64_t>(1, schedule->tokens_per_batch / seq_len_);
    tokens_before_.assign(1, 0);
    for (std::int64_t k = 0; k < options_.steps; ++k) {
      const data::ShapeStep& s = schedule->steps[static_cast<std::size_t>(k)];
      tokens_before_.push_back(tokens_before_.back() + s.batch * s.seq_len);
    }
  }
  options_.epochs = evaluations_of(options_);  // the shared loop's "epochs": evaluation intervals
  model_->to(device_);
  model_->train();
  const double lr = options_.lr > 0.0 ? options_.lr : default_lr(options_.optimizer);
  optimizer_ = make_language_model_optimizer(options_, gpt, lr);
  if (options_.schedule == "cosine") {
    // nanoGPT's get_lr: lr (it + 1) / (warmup + 1) during the warm-up, then cosine down to lr / 10
    // at the last step. The cosine is made first: it takes the optimizer's lr as its base before
    // the warm-up lowers it. Positions are steps, or with a shape schedule tokens (the warm-up
    // spans the tokens of its steps, at most the run's), so that a step of few tokens moves the
    // rate little.
    const std::int64_t warmup = warmup_steps_of(options_);
    const std::int64_t warmup_span = schedule_position(warmup);
    auto cosine = std::make_unique<optim::CosineAnnealingLR>(
        *optimizer_, std::max<std::int64_t>(1, schedule_position(options_.steps) - warmup_span), lr / 10.0);
    if (warmup > 0) {
      schedule_ = std::make_unique<optim::LinearWarmupLR>(*optimizer_, warmup_span,
                                                          1.0 / static_cast<double>(warmup + 1), std::move(cosine));
    } else {
      schedule_ = std::move(cosine);
    }
  }
  apply_schedule();
}

std::int64_t Trainer::windows_in_interval() const {
  const std::int64_t steps_before = epoch_ * options_.eval_interval;
  const std::int64_t steps = std::max<std::int64_t>(std::min(options_.eval_interval, options_.steps - steps_before), 0);
  if (!shape_schedule()) return steps * batch_size_;
  std::int64_t windows = 0;
  for (std::int64_t k = steps_before; k < steps_before + steps; ++k) windows += step_shape(k).batch;
  return windows;
}

data::ShapeStep Trainer::step_shape(std::int64_t step) const {
  const data::ShapeSchedule* schedule = shape_schedule();
  if (!schedule) return {.batch = batch_size_, .seq_len = seq_len_};
  if (step < 0 || step >= static_cast<std::int64_t>(schedule->steps.size()))
    throw ValueError(fmt::format("step {} is outside the shape schedule's {} steps", step, schedule->steps.size()));
  return schedule->steps[static_cast<std::size_t>(step)];
}

std::int64_t Trainer::schedule_position(std::int64_t step) const {
  if (tokens_before_.empty()) return step;
  const auto last = static_cast<std::int64_t>(tokens_before_.size()) - 1;
  return tokens_before_[static_cast<std::size_t>(std::clamp<std::int64_t>(step, 0, last))];
}

std::string Trainer::schedule_identity(std::int64_t steps_done) const {
  const data::ShapeSchedule& s = *shape_schedule();
  if (steps_done > static_cast<std::int64_t>(s.steps.size()))
    return fmt::format("{}; seed {}; {} steps (fewer than the {} trained)", s.describe(), s.seed, s.steps.size(),
                       steps_done);
  return fmt::format("{}; seed {}; steps 0..{} digest {:016x}", s.describe(), s.seed, steps_done - 1,
                     data::steps_digest(s, steps_done));
}

void Trainer::check_resumed_schedule(const std::filesystem::path& path, const TrainingPosition& pos) const {
  if (!language_model_) return;
  const std::string flags = "--seq-len-range, --tokens-per-batch and --seed, or the --shape-schedule,";
  if (!shape_schedule() && pos.shape_schedule.empty()) return;
  if (!shape_schedule())
    throw ValueError(fmt::format("checkpoint {} was trained with a shape schedule ({}); pass the {} of the run that "
                                 "wrote it",
                                 path.string(), pos.shape_schedule, flags));
  if (pos.shape_schedule.empty())
    throw ValueError(fmt::format("checkpoint {} was trained on fixed windows ({} a step), and this run has a shape "
                                 "schedule; resume it without --seq-len-range and --shape-schedule",
                                 path.string(), pos.batch_size));
  const std::string mine = schedule_identity(pos.global_step);
  if (mine != pos.shape_schedule)
    throw ValueError(fmt::format("checkpoint {} was trained with the shape schedule \"{}\", this run's gives its {} "
                                 "steps other shapes (\"{}\"); pass the {} of the run that wrote it",
                                 path.string(), pos.shape_schedule, pos.global_step, mine, flags));
}

std::string Trainer::describe_language_model() const {
  const auto& gpt = dynamic_cast<const models::GPT&>(*model_);
  const data::TokenDataset& tokens = *data_.tokens;
  const double base_lr = schedule_ ? schedule_->base_lr() : optimizer_->lr();
  const std::string schedule =
      options_.schedule == "cosine"
          ? fmt::format("warm-up {} steps, cosine to {:g}", warmup_steps_of(options_), base_lr / 10.0)
          : std::string("constant");
  const data::ShapeSchedule* shapes = shape_schedule();
  const std::string batches =
      shapes ? fmt::format("windows from the shape schedule {} (seed {}; learning rate over tokens), {} steps, "
                           "evaluation every {} steps on {} validation batches of {} x {} tokens",
                           shapes->describe(), shapes->seed, options_.steps, options_.eval_interval,
                           options_.eval_batches == 0 ? std::string("all") : std::to_string(options_.eval_batches),
                           batch_size_, seq_len_)
             : fmt::format("batch {} x {} tokens, {} steps, evaluation every {} steps on {} validation batches",
                           batch_size_, seq_len_, options_.steps, options_.eval_interval,
                           options_.eval_batches == 0 ? std::string("all") : std::to_string(options_.eval_batches));
  return fmt::format(
      "training {} ({:.2f} M parameters, context {}) on {} ({}) on {}: "
      "{} lr {:g} ({}), weight decay {:g} on 2-D weights, gradient clip {:g}, {}, {}, seed {}{}",
      options_.model, static_cast<double>(gpt.num_parameters()) / 1e6, gpt.config().block_size, options_.data,
      tokens.description, device_.str(), options_.optimizer, base_lr, schedule, options_.weight_decay,
      options_.grad_clip, batches, options_.precision, options_.seed,
      options_.cuda_graph ? fmt::format(", the step captured in a CUDA graph after 3 eager steps (memory plan {})",
                                        options_.memory_plan)
                          : std::string());
}

std::optional<float> Trainer::language_model_step() {
  if (samples_in_epoch_ >= images_per_epoch()) return std::nullopt;
  const data::ShapeStep shape = step_shape(global_step_);
  if (!token_sampler_ || token_sampler_->options().batch_size() != shape.batch ||
      token_sampler_->options().block_size() != shape.seq_len) {
    token_sampler_ = std::make_unique<data::RandomWindowSampler>(
        data_.tokens->train, data::TokenBatchOptions(shape.batch, shape.seq_len).seed(options_.seed).device(device_));
  }
  const double started = now_seconds();
  const data::TokenBatch batch = token_sampler_->batch(global_step_);
  last_step_shape_ = {.batch = batch.inputs.size(0), .seq_len = batch.inputs.size(1)};
  const std::int64_t tokens = batch.inputs.numel();
  float loss_value = 0.0f;
  try {
    loss_value = options_.cuda_graph ? language_model_graphed_step(batch.inputs, batch.targets)
                                     : language_model_forward_backward(batch.inputs, batch.targets);
  } catch (const OutOfMemoryError& error) {
    halve_after_oom(error, shape.batch, "training step");  // throws for a GPT run
    throw;
  }
  check_finite_loss(loss_value);
  if (!options_.cuda_graph) {
    try {
      clip_and_step();
    } catch (const OutOfMemoryError& error) {
      throw OutOfMemoryError(fmt::format(
          "out of memory in the optimizer update at batch size {} (not retried: the parameters may be partly "
          "updated; resume from the last checkpoint with a smaller --batch-size): {}",
          shape.batch, error.what()));
    }
  }
  ++global_step_;
  samples_in_epoch_ += shape.batch;
  epoch_images_ += shape.batch;
  epoch_tokens_ += tokens;
  epoch_loss_sum_ += static_cast<double>(loss_value) * static_cast<double>(tokens);  // the step's loss is a token mean
  epoch_timed_images_ += shape.batch;
  epoch_timed_tokens_ += tokens;
  epoch_step_seconds_ += now_seconds() - started;
  apply_schedule();
  report_step();
  return loss_value;
}

float Trainer::language_model_forward_backward(const Tensor& inputs, const Tensor& targets) {
  optimizer_->zero_grad();
  const Tensor loss = recipe_->forward([&] { return next_token_loss((*model_)(inputs), targets); });
  recipe_->backward(loss);
  return loss.item<float>();
}

void Trainer::clip_and_step() {
  if (options_.grad_clip > 0.0) {
    // Clipping sees the true gradients: an fp16 run unscales them first (the step then does not).
    // The norm and the scale stay on the device, so a captured step clips on every replay.
    if (amp::GradScaler* scaler = recipe_->scaler()) scaler->unscale_(*optimizer_);
    nn::utils::clip_grad_norm_tensor_(model_->parameters(), options_.grad_clip);
  }
  recipe_->step(*optimizer_);
}

float Trainer::language_model_graphed_step(const Tensor& inputs, const Tensor& targets) {
#ifdef SUBLET_HAVE_CUDA
  if (!graphed_) {
    graphed_ = std::make_shared<GraphedTrainStep>(
        [this](const Tensor& x, const Tensor& y) {
          optimizer_->zero_grad();  // first, so that the gradients live in the graph's pool
          Tensor loss = recipe_->forward([&] { return next_token_loss((*model_)(x), y); });
          recipe_->backward(loss);
          clip_and_step();
          return loss;
        },
        *optimizer_, inputs.sizes(), targets.sizes(), device_, /*warmup_steps=*/3, DType::Int64);
    graphed_->set_memory_plan(parse_memory_plan(options_.memory_plan));
  }
  const bool captured_before = graphed_->graphed();
  const Tensor loss = graphed_->run(inputs, targets);
  note_capture(captured_before);
  const float value = loss.item<float>();
  graphed_->check_last_replay();  // a token id or target out of range: its error, at this step
  return value;
#else
  (void)inputs, (void)targets;
  throw DeviceError("--cuda-graph: this sublet was built without CUDA");
#endif
}

double Trainer::validation_loss() {
  NoGradGuard no_grad;
  model_->eval();
  data::ValidationBatches batches(data_.tokens->validation, data::TokenBatchOptions(batch_size_, seq_len_).device(device_),
                                  options_.eval_batches);
  double loss_sum = 0.0;
  std::int64_t tokens = 0;
  while (std::optional<data::TokenBatch> batch = batches.next()) {
    // Under the training step's autocast, as nanoGPT's estimate_loss.
    const Tensor loss = recipe_->forward([&] { return next_token_loss((*model_)(batch->inputs), batch->targets); });
    const std::int64_t n = batch->targets.numel();
    loss_sum += loss.item<double>() * static_cast<double>(n);
    tokens += n;
  }
  model_->train();
  return tokens > 0 ? loss_sum / static_cast<double>(tokens) : std::nan("");
}

}  // namespace sublet::train
