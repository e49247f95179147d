// A GPT training step captured into a CUDA graph (runtime/step/graphed_train_step.h): gpt-nano over
// GPT-2's 50,304-token vocabulary, next-token cross-entropy with ignored targets, backward,
// clipping by the global norm (max 0.05: active every step), AdamW over nanoGPT's two groups with
// a warm-up + cosine learning rate set between steps, zero_grad.
//  - One eager warm-up step, then 5 captured steps (capture + replays) give the eager run's losses,
//    gradient norms and final parameters, in float32 and under bfloat16 autocast, with the
//    caching and the static memory plan. Tolerances: 1e-5 relative on losses and norms, 1e-5 on
//    the parameters (float32) and 1e-3 relative / 1e-4 (bfloat16): the two runs launch the same
//    kernels on the same data, and differ only where float atomics sum in another order (the
//    embedding gradient's scatter-add).
//  - A token id or a target out of range in a replayed step throws the eager step's error after
//    the replay (check_last_replay), and the next good batch replays cleanly.
//  - A model with dropout refuses the capture (its mask would repeat on every replay).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/errors.h"
#include "models/gpt.h"
#include "models/registry.h"
#include "runtime/amp/step_recipe.h"
#include "runtime/factories.h"
#include "runtime/nn/clip_grad.h"
#include "runtime/nn/functional.h"
#include "runtime/optim/adam.h"
#include "runtime/optim/lr_scheduler.h"
#include "runtime/step/graphed_train_step.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

constexpr std::int64_t kVocab = 50304;
constexpr std::int64_t kBatch = 4;
constexpr std::int64_t kTokens = 32;
constexpr int kWarmup = 1;
constexpr int kSteps = kWarmup + 5;
constexpr double kMaxNorm = 0.05;

struct Batch {
  Tensor inputs, targets;  // on the host
};

// Seeded ids; every 7th target is the ignore index (-100), as padding would be.
std::vector<Batch> token_batches(int count) {
  Generator g(41);
  std::vector<Batch> out;
  for (int b = 0; b < count; ++b) {
    std::vector<std::int64_t> ids(kBatch * kTokens), targets(kBatch * kTokens);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      ids[i] = static_cast<std::int64_t>(g.engine()() % kVocab);
      targets[i] = i % 7 == 3 ? -100 : static_cast<std::int64_t>(g.engine()() % kVocab);
    }
    out.push_back({Tensor::from_vector(ids, {kBatch, kTokens}), Tensor::from_vector(targets, {kBatch, kTokens})});
  }
  return out;
}

// The model, nanoGPT's optimizer groups and schedule, and the step as a GPT trainer writes it.
struct GptTraining {
  std::shared_ptr<models::GPT> model;
  std::unique_ptr<optim::AdamW> optimizer;
  std::unique_ptr<optim::LRScheduler> schedule;
  amp::StepRecipe recipe;
  Tensor norm;  // the last step's gradient norm (in the graph's pool once captured)

  GptTraining(amp::Precision precision, double dropout = 0.0) : recipe(precision, Device::cuda(0)) {
    models::GPTConfig config = models::gpt_config("gpt-nano", kVocab);
    config.seed = 3;
    config.dropout = dropout;
    model = std::make_shared<models::GPT>(config);
    model->to(Device::cuda(0));
    model->train();
    optimizer = std::make_unique<optim::AdamW>(
        std::vector<optim::AdamParamGroup>{{model->decay_parameters(), 0.1}, {model->no_decay_parameters(), 0.0}},
        optim::AdamOptions(3e-3).betas(0.9, 0.95).weight_decay(0.1));
    auto cosine = std::make_unique<optim::CosineAnnealingLR>(*optimizer, kSteps - 2, 3e-4);
    schedule = std::make_unique<optim::LinearWarmupLR>(*optimizer, 2, 1.0 / 3.0, std::move(cosine));
  }

  Tensor step(const Tensor& inputs, const Tensor& targets) {
    optimizer->zero_grad();  // first: the captured gradients live in the graph's pool
    Tensor loss = recipe.forward([&] {
      return nn::functional::cross_entropy((*model)(inputs), targets, nn::functional::CrossEntropyFuncOptions());
    });
    recipe.backward(loss);
    norm = nn::utils::clip_grad_norm_tensor_(model->parameters(), kMaxNorm);
    recipe.step(*optimizer);
    return loss;
  }
};

struct TrainingRun {
  std::vector<float> losses, norms, lrs;
  std::vector<Tensor> params;
};

TrainingRun train(amp::Precision precision, bool graphed, MemoryPlan plan = MemoryPlan::Cached) {
  const Device gpu = Device::cuda(0);
  GptTraining t(precision);
  std::unique_ptr<GraphedTrainStep> graph;
  if (graphed) {
    graph = std::make_unique<GraphedTrainStep>([&](const Tensor& x, const Tensor& y) { return t.step(x, y); },
                                               *t.optimizer, Shape{kBatch, kTokens}, Shape{kBatch, kTokens}, gpu,
                                               kWarmup, DType::Int64);
    graph->set_memory_plan(plan);
  }
  const std::vector<Batch> batches = token_batches(kSteps);
  TrainingRun run;
  for (int i = 0; i < kSteps; ++i) {
    const Tensor inputs = batches[static_cast<std::size_t>(i)].inputs.to(gpu);
    const Tensor targets = batches[static_cast<std::size_t>(i)].targets.to(gpu);
    run.lrs.push_back(static_cast<float>(t.optimizer->lr()));
    const Tensor loss = graphed ? graph->run(inputs, targets) : t.step(inputs, targets);
    run.losses.push_back(loss.item<float>());
    if (graphed) graph->check_last_replay();
    run.norms.push_back(t.norm.item<float>());
    t.schedule->step();
  }
  if (graphed) {
    EXPECT_TRUE(graph->graphed());
    EXPECT_EQ(graph->steps(), kSteps);
    // The embedding ids (wte) and the loss's targets are checked on every replay.
    EXPECT_EQ(graph->captured_index_checks(), 2u);
  }
  for (const Tensor& p : t.model->parameters()) run.params.push_back(p.detach().to(Device::cpu()));
  return run;
}

double relative(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-12); }

void expect_same_training(amp::Precision precision, MemoryPlan plan, double rel_tol, double param_tol) {
  const TrainingRun eager = train(precision, false);
  const TrainingRun graphed = train(precision, true, plan);
  ASSERT_EQ(eager.losses.size(), graphed.losses.size());
  for (std::size_t i = 0; i < eager.losses.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    ASSERT_TRUE(std::isfinite(eager.losses[i]));
    EXPECT_LE(relative(graphed.losses[i], eager.losses[i]), rel_tol) << graphed.losses[i] << " vs " << eager.losses[i];
    EXPECT_LE(relative(graphed.norms[i], eager.norms[i]), rel_tol) << graphed.norms[i] << " vs " << eager.norms[i];
    EXPECT_GT(eager.norms[i], kMaxNorm) << "clipping must be active";
    EXPECT_EQ(graphed.lrs[i], eager.lrs[i]);
  }
  // The schedule moves the rate on every step (warm-up, then cosine).
  for (std::size_t i = 1; i < eager.lrs.size(); ++i) EXPECT_NE(eager.lrs[i], eager.lrs[i - 1]) << "step " << i;
  // The run learns something: a step with the same schedule and data but no update would repeat.
  EXPECT_NE(eager.losses.front(), eager.losses.back());
  ASSERT_EQ(eager.params.size(), graphed.params.size());
  for (std::size_t p = 0; p < eager.params.size(); ++p) {
    const std::vector<float> a = eager.params[p].to_vector<float>(), b = graphed.params[p].to_vector<float>();
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const double d = std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
      worst = std::isnan(d) ? INFINITY : std::max(worst, d);
    }
    EXPECT_LE(worst, param_tol) << "parameter " << p;
  }
}

TEST(GptCudaGraph, Float32StepMatchesEager) {
  SUBLET_SKIP_WITHOUT_GPU("a captured gpt-nano step (clipping, AdamW, warm-up + cosine lr) against the eager one");
  expect_same_training(amp::Precision::Fp32, MemoryPlan::Cached, 1e-5, 1e-5);
}

TEST(GptCudaGraph, Bfloat16StepMatchesEager) {
  SUBLET_SKIP_WITHOUT_GPU("a captured gpt-nano step under bfloat16 autocast against the eager one");
  expect_same_training(amp::Precision::Bf16, MemoryPlan::Cached, 1e-3, 1e-4);
}

TEST(GptCudaGraph, StaticMemoryPlanStepMatchesEager) {
  SUBLET_SKIP_WITHOUT_GPU("a gpt-nano step captured with the static memory plan against the eager one");
  expect_same_training(amp::Precision::Bf16, MemoryPlan::Static, 1e-3, 1e-4);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

// A bad token id (or target) in a replayed step: the eager step's message, after the replay.
TEST(GptCudaGraph, BadTokenIdFailsWithTheEagerMessage) {
  SUBLET_SKIP_WITHOUT_GPU("a captured GPT step meeting a token id out of range");
  const Device gpu = Device::cuda(0);
  const std::vector<Batch> batches = token_batches(2);
  Tensor bad_ids = batches[0].inputs.clone();
  bad_ids.data<std::int64_t>()[37] = kVocab + 5;
  Tensor bad_targets = batches[0].targets.clone();
  bad_targets.data<std::int64_t>()[21] = kVocab;

  GptTraining eager(amp::Precision::Bf16);
  const std::string eager_id_error = error_of([&] { eager.step(bad_ids.to(gpu), batches[0].targets.to(gpu)); });
  EXPECT_NE(eager_id_error.find("embedding: id 50309 at position 37 is outside the table of 50304"), std::string::npos)
      << eager_id_error;
  const std::string eager_target_error = error_of([&] { eager.step(batches[0].inputs.to(gpu), bad_targets.to(gpu)); });
  EXPECT_NE(eager_target_error.find("cross_entropy: target 50304 of sample 21 is outside [0, 50304)"), std::string::npos)
      << eager_target_error;

  GptTraining t(amp::Precision::Bf16);
  GraphedTrainStep graph([&](const Tensor& x, const Tensor& y) { return t.step(x, y); }, *t.optimizer,
                         Shape{kBatch, kTokens}, Shape{kBatch, kTokens}, gpu, kWarmup, DType::Int64);
  const auto run = [&](const Tensor& ids, const Tensor& targets) {
    const float loss = graph.run(ids.to(gpu), targets.to(gpu)).item<float>();
    graph.check_last_replay();
    return loss;
  };
  EXPECT_TRUE(std::isfinite(run(batches[0].inputs, batches[0].targets)));  // eager warm-up
  EXPECT_TRUE(std::isfinite(run(batches[1].inputs, batches[1].targets)));  // capture + replay
  ASSERT_TRUE(graph.graphed());
  EXPECT_EQ(error_of([&] { run(bad_ids, batches[0].targets); }), eager_id_error);
  EXPECT_TRUE(std::isfinite(run(batches[1].inputs, batches[1].targets)));  // checked clean again
  EXPECT_EQ(error_of([&] { run(batches[0].inputs, bad_targets); }), eager_target_error);
  // Unread after its replay, the error comes with the next run() instead, before that step.
  graph.run(bad_ids.to(gpu), batches[0].targets.to(gpu));
  EXPECT_EQ(error_of([&] { graph.run(batches[1].inputs.to(gpu), batches[1].targets.to(gpu)); }), eager_id_error);
  EXPECT_EQ(graph.steps(), 6);
}

TEST(GptCudaGraph, DropoutRefusesTheCapture) {
  SUBLET_SKIP_WITHOUT_GPU("a GPT with dropout refusing CUDA graph capture");
  const Device gpu = Device::cuda(0);
  GptTraining t(amp::Precision::Fp32, /*dropout=*/0.1);
  GraphedTrainStep graph([&](const Tensor& x, const Tensor& y) { return t.step(x, y); }, *t.optimizer,
                         Shape{kBatch, kTokens}, Shape{kBatch, kTokens}, gpu, kWarmup, DType::Int64);
  const std::vector<Batch> batches = token_batches(2);
  graph.run(batches[0].inputs.to(gpu), batches[0].targets.to(gpu)).item<float>();  // eager: dropout runs
  const std::string error =
      error_of([&] { graph.run(batches[1].inputs.to(gpu), batches[1].targets.to(gpu)).item<float>(); });
  EXPECT_NE(error.find("dropout: a CUDA graph would replay the mask drawn at its capture"), std::string::npos) << error;
  EXPECT_FALSE(graph.graphed());
}

}  // namespace
}  // namespace sublet
