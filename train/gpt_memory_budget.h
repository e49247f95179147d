#pragma once
// --memory-budget for GPT models: recompute whole blocks in backward (nn::checkpoint, one block
// each, as torch.utils.checkpoint per block) until the training step's peak fits. A GPT's blocks
// are alike, so the choice is a count: the step is measured with no block and with every block
// recomputed, the count the difference per block predicts is applied, and the step is measured
// again (one more block while it does not fit). The first blocks are the ones recomputed.
#include <cstddef>
#include <cstdint>
#include <string>

#include "analysis/recompute_plan.h"
#include "models/gpt.h"
#include "runtime/amp/step_recipe.h"

namespace sublet::train {

struct GptRecomputeReport {
  std::size_t budget_bytes = 0;
  std::size_t baseline_peak = 0;        // nothing recomputed (+ the optimizer state to come)
  std::size_t all_recomputed_peak = 0;  // every block recomputed (0 when not measured: it fit already)
  std::size_t measured_peak = 0;        // with the choice
  std::int64_t recomputed_blocks = 0;
  std::int64_t blocks = 0;
  std::string summary() const;          // one line for logs
};

// Measures forward + backward of the next-token loss on (inputs, targets) under the recipe's
// autocast; parameters are untouched and the gradients dropped. ValueError (the model left
// recomputing nothing) when even every block recomputed does not fit.
GptRecomputeReport fit_gpt_memory_budget(models::GPT& model, const memory::MemoryBudget& budget, const Tensor& inputs,
                                         const Tensor& targets, const amp::StepRecipe& recipe,
                                         std::size_t optimizer_state_bytes);

}  // namespace sublet::train
