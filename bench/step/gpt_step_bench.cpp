// `sublet bench step --model gpt-mini`: nanoGPT's training step on random token windows: forward
// and next-token cross-entropy (under the precision's autocast), backward, gradient clipping to
// norm 1.0, AdamW (lr 6e-4, betas 0.9/0.95, weight decay 0.1 on 2-D weights, fused update),
// zero_grad. bench/pytorch_step.py runs the same step in PyTorch. With --cuda-graph (fixed shapes:
// one batch size and --seq-len) the step is captured once and replayed (bench/step/graph_step.h).
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <random>

#include "bench/step/graph_step.h"
#include "bench/step/step_bench.h"
#include "core/errors.h"
#include "models/gpt.h"
#include "models/registry.h"
#include "runtime/factories.h"
#include "runtime/nn/clip_grad.h"
#include "runtime/nn/functional.h"
#include "runtime/optim/adam.h"

namespace sublet::bench {
namespace {

constexpr double kDenseBf16PeakFlops = 989e12;  // H100/H200 SXM, dense bfloat16

Tensor random_ids(std::int64_t batch, std::int64_t tokens, std::int64_t vocab, std::mt19937_64& engine, Device device) {
  Tensor ids = empty({batch, tokens}, DType::Int64);
  std::uniform_int_distribution<std::int64_t> pick(0, vocab - 1);
  std::int64_t* out = ids.data<std::int64_t>();
  for (std::int64_t i = 0; i < batch * tokens; ++i) out[i] = pick(engine);
  return ids.to(device);
}

}  // namespace

StepBenchResult run_gpt_step_bench(const StepBenchOptions& options, std::ostream* progress) {
  if (!options.memory_budget.empty() || options.parallel || options.memory_format != MemoryFormat::Contiguous) {
    throw ValueError("bench step --model " + options.model +
                     ": GPT steps run on one device without recomputation; drop --memory-budget, --nproc-per-node and "
                     "--channels-last");
  }
  if (options.cuda_graph && options.schedule)
    throw ValueError("bench step --model " + options.model +
                     " --cuda-graph: a CUDA graph replays one step of fixed shapes, and the shape schedule changes them "
                     "every step; drop --cuda-graph or the schedule (--seq-len-range/--shape-schedule)");
  if (options.cuda_graph && !options.device.is_cuda())
    throw DeviceError("bench step --cuda-graph: needs --device cuda (CUDA graphs exist only on the GPU), this run is on " +
                      options.device.str());
  if (options.batch_size <= 0 || options.steps <= 0 || options.warmup < 0 || options.seq_len < 0 || options.block_size < 0 ||
      options.vocab_size <= 0) {
    throw ValueError(fmt::format("bench step: batch size, steps, vocabulary must be positive, warm-up, --seq-len and "
                                 "--block-size non-negative, got {}, {}, {}, {}, {}, {}",
                                 options.batch_size, options.steps, options.vocab_size, options.warmup, options.seq_len,
                                 options.block_size));
  }
  StepBenchResult result;
  result.options = options;
  result.language_model = true;
  result.threads = omp_get_max_threads();
  const Device device = options.device;
  auto model = std::dynamic_pointer_cast<models::GPT>(models::create_model(
      options.model, {.vocab_size = options.vocab_size, .seed = options.seed, .block_size = options.block_size}));
  const models::GPTConfig& config = model->config();
  const data::ShapeSchedule* schedule = options.schedule.get();
  if (schedule)
    data::check_schedule_for_run(*schedule, {.model = options.model, .language_model = true,
                                             .context = config.block_size, .steps = options.warmup + options.steps,
                                             .steps_source = "warm-up + timed steps",
                                             .context_hint = "--block-size sets a longer one"});
  const std::int64_t seq_len = options.seq_len > 0 ? options.seq_len : config.block_size;
  if (!schedule && seq_len > config.block_size) {
    throw ValueError(fmt::format("bench step: --seq-len {} is longer than {}'s context of {}", seq_len, options.model,
                                 config.block_size));
  }
  result.seq_len = schedule ? schedule->longest() : seq_len;
  model->train();
  if (device != Device::cpu()) model->to(device);
  amp::StepRecipe recipe(options.precision, device);
  optim::AdamW optimizer({{model->decay_parameters(), 0.1}, {model->no_decay_parameters(), 0.0}},
                         optim::AdamOptions(6e-4).betas(0.9, 0.95).weight_decay(0.1));
  std::mt19937_64 engine(options.seed + 1);
  // With a schedule: token pools on the host, as long as the largest step; step i's windows are
  // their first batch x seq_len ids, copied to the device each step as a loader's batch would be.
  const std::int64_t pool_tokens = schedule ? schedule->most_tokens() : options.batch_size * seq_len;
  const Tensor input_pool = random_ids(1, pool_tokens, options.vocab_size, engine, Device::cpu()).view({pool_tokens});
  const Tensor target_pool = random_ids(1, pool_tokens, options.vocab_size, engine, Device::cpu()).view({pool_tokens});
  const auto window = [&](const Tensor& pool, std::int64_t batch, std::int64_t tokens) {
    return pool.narrow(0, 0, batch * tokens).view({batch, tokens}).to(device);
  };
  const std::vector<Tensor> parameters = model->parameters();
  if (progress) {
    *progress << fmt::format("bench step: {} ({:.2f} M parameters) on {}, {}, {} warm-up + {} timed steps\n",
                             options.model, static_cast<double>(model->num_parameters()) / 1e6, device.str(),
                             schedule ? "token windows " + schedule->describe()
                                      : fmt::format("batch {} x {} tokens", options.batch_size, seq_len),
                             options.warmup, options.steps);
  }
  // Forward and loss, backward, clipping, update; the loss stays on the device.
  const auto step_on = [&](const Tensor& inputs, const Tensor& targets) {
    Tensor loss = recipe.forward([&] {
      return nn::functional::cross_entropy((*model)(inputs), targets, nn::functional::CrossEntropyFuncOptions());
    });
    recipe.backward(loss);
    if (amp::GradScaler* scaler = recipe.scaler()) scaler->unscale_(optimizer);
    nn::utils::clip_grad_norm_tensor_(parameters, 1.0);
    recipe.step(optimizer);
    return loss;
  };
  const auto train_on = [&](const Tensor& inputs, const Tensor& targets) {
    (void)step_on(inputs, targets).item<float>();
    optimizer.zero_grad();
  };
  const auto shape_of = [&](std::int64_t i) {
    return schedule ? schedule->steps[static_cast<std::size_t>(i)] : data::ShapeStep{.batch = options.batch_size, .seq_len = seq_len};
  };
  if (options.cuda_graph) {
    // The same step, captured: zero_grad first (the gradients then live in the graph's pool), and
    // the loss read after each replay instead of inside the step.
    const auto step = [&](const Tensor& inputs, const Tensor& targets) {
      optimizer.zero_grad();
      return step_on(inputs, targets);
    };
    time_graphed_steps(step, optimizer, window(input_pool, options.batch_size, seq_len),
                       window(target_pool, options.batch_size, seq_len), result);
    result.ms_per_step = median(result.step_ms);
    result.img_per_s = static_cast<double>(options.batch_size) * 1000.0 / result.ms_per_step;  // sequences
    result.timed_samples = options.steps * options.batch_size * seq_len;
    double total_ms = 0;
    for (double ms : result.step_ms) total_ms += ms;
    result.us_per_sample = total_ms * 1000.0 / static_cast<double>(std::max<std::int64_t>(result.timed_samples, 1));
  } else if (schedule) {
    time_eager_steps(
        [&](std::int64_t i) {
          const data::ShapeStep s = shape_of(i);
          train_on(window(input_pool, s.batch, s.seq_len), window(target_pool, s.batch, s.seq_len));
        },
        [&](std::int64_t i) { return shape_of(i).batch * shape_of(i).seq_len; }, options, result);
  } else {
    const Tensor inputs = window(input_pool, options.batch_size, seq_len);
    const Tensor targets = window(target_pool, options.batch_size, seq_len);
    time_eager_steps([&](std::int64_t) { train_on(inputs, targets); },
                     [&](std::int64_t) { return options.batch_size * seq_len; }, options, result);
  }
  // Fixed shapes: from the median step, as before; a schedule's steps differ, so all of them count.
  result.tokens_per_s = !schedule ? static_cast<double>(options.batch_size * seq_len) * 1000.0 / result.ms_per_step
                        : result.us_per_sample > 0 ? 1e6 / result.us_per_sample
                                                   : 0.0;
  // Attention's FLOPs grow with the window: averaged over the timed tokens.
  double token_weighted_len = 0;
  for (std::int64_t i = options.warmup; i < options.warmup + options.steps; ++i)
    token_weighted_len += static_cast<double>(shape_of(i).batch * shape_of(i).seq_len * shape_of(i).seq_len);
  token_weighted_len /= static_cast<double>(std::max<std::int64_t>(result.timed_samples, 1));
  result.flops_per_token = 6.0 * static_cast<double>(model->num_parameters(/*with_position_embeddings=*/false)) +
                           12.0 * static_cast<double>(config.n_layer * config.n_embd) * token_weighted_len;
  result.mfu = device.is_cuda() ? result.flops_per_token * result.tokens_per_s / kDenseBf16PeakFlops : 0.0;
  return result;
}

}  // namespace sublet::bench
