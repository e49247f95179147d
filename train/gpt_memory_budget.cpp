#include "train/gpt_memory_budget.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/errors.h"
#include "core/format_bytes.h"
#include "memory/registry.h"
#include "runtime/nn/functional.h"

namespace sublet::train {
namespace {

std::string bytes(std::size_t n) { return format_bytes(static_cast<std::int64_t>(n)); }

void recompute_first(models::GPT& model, std::int64_t count) {
  std::vector<nn::Sequential::Run> runs;
  for (std::int64_t i = 0; i < count; ++i) runs.emplace_back(static_cast<std::size_t>(i), static_cast<std::size_t>(i + 1));
  model.set_recompute_blocks(runs);
}

std::size_t step_peak(models::GPT& model, const Tensor& inputs, const Tensor& targets, const amp::StepRecipe& recipe,
                      std::size_t optimizer_state_bytes) {
  const Device device = inputs.device();
  model.zero_grad();
  reset_peak_memory_stats(device);
  {
    const Tensor loss = recipe.forward([&] {
      return nn::functional::cross_entropy(model(inputs), targets, nn::functional::CrossEntropyFuncOptions());
    });
    loss.backward();
  }
  const std::size_t peak = max_memory_allocated(device);
  model.zero_grad();
  return peak + optimizer_state_bytes;
}

}  // namespace

std::string GptRecomputeReport::summary() const {
  if (recomputed_blocks == 0) {
    return fmt::format("memory budget {}: the step's peak {} fits without recomputation", bytes(budget_bytes),
                       bytes(baseline_peak));
  }
  return fmt::format("memory budget {}: recomputing {} of {} blocks in backward (transformer.h.0-{}), peak {} "
                     "(without recomputation {}, with every block {})",
                     bytes(budget_bytes), recomputed_blocks, blocks, recomputed_blocks - 1, bytes(measured_peak),
                     bytes(baseline_peak), bytes(all_recomputed_peak));
}

GptRecomputeReport fit_gpt_memory_budget(models::GPT& model, const memory::MemoryBudget& budget, const Tensor& inputs,
                                         const Tensor& targets, const amp::StepRecipe& recipe,
                                         std::size_t optimizer_state_bytes) {
  GptRecomputeReport report;
  report.blocks = model.config().n_layer;
  recompute_first(model, 0);
  report.baseline_peak = step_peak(model, inputs, targets, recipe, optimizer_state_bytes);
  report.budget_bytes = memory::resolve_budget(budget, report.baseline_peak);
  report.measured_peak = report.baseline_peak;
  if (report.baseline_peak <= report.budget_bytes) return report;

  recompute_first(model, report.blocks);
  report.all_recomputed_peak = step_peak(model, inputs, targets, recipe, optimizer_state_bytes);
  if (report.all_recomputed_peak > report.budget_bytes) {
    recompute_first(model, 0);
    throw ValueError(fmt::format("--memory-budget {}: even with every block recomputed the step's peak is {} (without "
                                 "recomputation {}); lower --batch-size or --seq-len, or use --precision bf16",
                                 bytes(report.budget_bytes), bytes(report.all_recomputed_peak),
                                 bytes(report.baseline_peak)));
  }
  // The saving per block predicts the count; measured, one more while it does not fit.
  const double per_block = static_cast<double>(report.baseline_peak - std::min(report.baseline_peak, report.all_recomputed_peak)) /
                           static_cast<double>(report.blocks);
  const double excess = static_cast<double>(report.baseline_peak - report.budget_bytes);
  std::int64_t count = per_block > 0 ? static_cast<std::int64_t>(std::ceil(excess / per_block)) : report.blocks;
  count = std::clamp<std::int64_t>(count, 1, report.blocks);
  for (;; ++count) {
    recompute_first(model, count);
    report.measured_peak = count == report.blocks ? report.all_recomputed_peak
                                                  : step_peak(model, inputs, targets, recipe, optimizer_state_bytes);
    if (report.measured_peak <= report.budget_bytes || count == report.blocks) break;
  }
  report.recomputed_blocks = count;
  return report;
}

}  // namespace sublet::train
