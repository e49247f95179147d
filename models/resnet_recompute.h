#pragma once
// Recomputation under a memory budget for the ResNets (`--memory-budget`): measure what
// each block of the stages keeps alive for backward and how long its forward takes, choose the
// runs of blocks to recompute (runtime/step/recompute_plan.h), and have the stages recompute them
// (nn::Sequential::set_recompute_runs, ResNet::set_recompute_stem). The units are the stem (unit
// 0, recomputed on its own) and the stages' blocks (runs stay within a stage); the head's
// activations are a few kilobytes and not worth it.
//
// The measurement runs forward and backward on the given batch twice (the first pass chooses
// cuDNN algorithms, the second is measured, block by block with a device synchronisation around
// each for its time), never the optimizer: the parameters are untouched, the batch-norm running
// statistics are put back, and the gradients are dropped. Then each unit is run on its own,
// recomputed (forward, gradient of its output, recomputation, backward), for its backward_bytes.
// The optimizer state that the first real step will create (optimizer_state_bytes) is added to
// the measured peak. The device's peak
// statistics are reset by the measurement (it reads them), and its cache is emptied after it.
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/resnet.h"
#include "runtime/step/recompute_plan.h"

namespace sublet::models {

struct BlockMeasurement {
  std::vector<RecomputeUnit> units;  // one per block, in forward order ("layer1.0", ...)
  // Of each unit's backward_bytes, the gradients of its parameters and of those after it: not per
  // image (what measure_blocks_that_fit does not scale with the batch).
  std::vector<std::size_t> parameter_gradient_bytes;
  std::size_t fixed_bytes = 0;               // allocated before the forward, + optimizer state to come
  std::size_t baseline_peak = 0;             // the step's peak allocated bytes, nothing recomputed
  double forward_ms = 0;                     // the whole forward of the measured pass
};

BlockMeasurement measure_blocks(ResNet& model, const Tensor& images, const Tensor& labels,
                                std::size_t optimizer_state_bytes);

// Peak allocated bytes of one forward + backward as the model now stands (recomputation
// included), plus optimizer_state_bytes; leaves parameters and buffers as they were.
std::size_t measure_step_peak(ResNet& model, const Tensor& images, const Tensor& labels,
                              std::size_t optimizer_state_bytes);

// Sets every stage's recompute runs from runs over measure_blocks' units (none: recompute nothing).
void apply_recompute(ResNet& model, const std::vector<RecomputeRun>& runs);

// The measured blocks as JSON ([{"name", "group", "retained_bytes", "output_bytes", "forward_ms",
// "backward_bytes"}]; backward_bytes may be absent when read),
// which `sublet plan --recompute` reads back (units_from_json: ValueError naming a bad entry).
nlohmann::json units_json(const std::vector<RecomputeUnit>& units);
std::vector<RecomputeUnit> units_from_json(const nlohmann::json& j);

// "layer1.0-layer1.2, layer3.1" for the report; a nested run in brackets: "[layer1.0-layer1.2]".
std::string describe_runs(const std::vector<RecomputeUnit>& units, const std::vector<RecomputeRun>& runs);

}  // namespace sublet::models

namespace sublet::models {

// The whole of `--memory-budget`: measure, choose, apply, and measure the step again with the
// choice. When the measured peak still exceeds the budget (the peak model is an estimate), the
// choice is made again against a budget lowered by the excess, up to three times. Where the
// unbudgeted step does not fit the device, the blocks are measured on a half (a quarter, ...) of
// the batch and scaled up. ValueError when nothing fits (the model is left recomputing nothing),
// naming the smallest peak reached.
struct RecomputeReport {
  std::size_t budget_bytes = 0;
  std::size_t baseline_peak = 0;    // measured, nothing recomputed (+ optimizer state to come)
  std::size_t fixed_bytes = 0;      // parameters, batch, optimizer state: the peak model's fixed part
  std::size_t predicted_peak = 0;   // by the model, for the choice
  std::size_t measured_peak = 0;    // measured with the choice applied
  double recompute_ms = 0;          // forward time of the recomputed blocks
  double forward_ms = 0;            // the whole measured forward
  std::vector<RecomputeUnit> units;
  std::vector<RecomputeRun> runs;
  std::int64_t measured_on_fraction = 1;  // > 1: the blocks were measured on batch / this, scaled up
  std::string summary() const;      // one line for logs
};
RecomputeReport fit_memory_budget(ResNet& model, const MemoryBudget& budget, const Tensor& images,
                                  const Tensor& labels, std::size_t optimizer_state_bytes);
// The same on a batch made up for it: `batch` random images of `image_shape` (C, H, W) drawn from
// `seed`, labels cycling through `classes`, on `device` (bytes and times do not depend on values).
RecomputeReport fit_memory_budget(ResNet& model, const MemoryBudget& budget, std::int64_t batch,
                                  const Shape& image_shape, std::int64_t classes, Device device, std::uint64_t seed,
                                  std::size_t optimizer_state_bytes);

}  // namespace sublet::models
