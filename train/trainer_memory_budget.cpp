// --memory-budget: before the first step, measure every ResNet block on a random batch
// of the training shape, choose the cheapest runs of blocks to recompute whose peak fits the
// budget, and have the model recompute them. Random data: the bytes and times do not depend on
// the values, and the training data and its random streams are left untouched.
#include <fmt/format.h>

#include "core/errors.h"
#include "models/resnet_recompute.h"
#include "train/gpt_memory_budget.h"
#include "train/trainer.h"

namespace sublet::train {

void Trainer::fit_memory_budget() {
  if (language_model_) {
    // The first training batch (the sampler's batch 0): drawing it advances nothing.
    const data::TokenBatch batch =
        data::RandomWindowSampler(data_.tokens->train,
                                  data::TokenBatchOptions(batch_size_, seq_len_).seed(options_.seed).device(device_))
            .batch(0);
    const GptRecomputeReport report =
        fit_gpt_memory_budget(dynamic_cast<models::GPT&>(*model_), memory::parse_memory_budget(options_.memory_budget),
                              batch.inputs, batch.targets, *recipe_, optimizer_->state_bytes_to_come());
    note(report.summary());
    memory_budget_fit_ = MemoryBudgetFit{.budget_bytes = report.budget_bytes, .baseline_peak = report.baseline_peak};
    return;
  }
  auto* resnet = dynamic_cast<models::ResNet*>(model_.get());
  if (!resnet) throw ValueError("--memory-budget recomputes ResNet blocks; --model " + options_.model + " is not a ResNet");
  const data::ImageDataset& train = *data_.train;
  // Its own generator: the training's random streams are not advanced. Under the step's autocast:
  // 16-bit activations change what each block holds.
  const models::RecomputeReport report = recipe_->forward([&] {
    return models::fit_memory_budget(*resnet, memory::parse_memory_budget(options_.memory_budget), batch_size_,
                                     {train.channels, train.height, train.width}, train.num_classes, device_,
                                     options_.seed ^ 0x6d656d6f7279ULL, optimizer_->state_bytes_to_come());
  });
  note(report.summary());
  memory_budget_fit_ = MemoryBudgetFit{.budget_bytes = report.budget_bytes, .baseline_peak = report.baseline_peak};
}

}  // namespace sublet::train
