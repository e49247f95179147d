#pragma once
// The --metrics-json file:
//   {"model": "resnet20", "device": "cpu", "data": "mnist",
//    "epochs": [{"epoch": 1, "train_loss": ..., "train_acc": ..., "test_acc": ..., "img_per_s": ...,
//                "peak_allocated_bytes": ..., "peak_reserved_bytes": ..., "seconds": ..., "batch_size": ...}],
//    "final_test_acc": ...}
// Accuracies are fractions in [0, 1]; final_test_acc is the last epoch's (null before any epoch).
// GPT runs list evaluations instead ({"evaluation", "step", "train_loss", "val_loss", "tokens", ...},
// final_val_loss); with a shape schedule the document adds
//   "shape_schedule": {"seq_len_min", "seq_len_max", "multiple", "tokens_per_batch", "seed", "steps",
//                      "eval_seq_len"}.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "train/epoch_metrics.h"

namespace sublet::train {

// How a GPT run with a shape schedule drew its steps (runtime/data/shape_schedule.h): the range,
// the length multiple, the tokens a batch keeps about, the seed, the steps trained from it, and
// the fixed window length of the evaluations.
struct ShapeScheduleSummary {
  std::int64_t seq_len_min = 0, seq_len_max = 0, multiple = 0, tokens_per_batch = 0;
  std::uint64_t seed = 0;
  std::int64_t steps = 0;
  std::int64_t eval_seq_len = 0;
};

struct RunDescription {
  std::string model;
  std::string device;
  std::string data;
  std::optional<ShapeScheduleSummary> shape_schedule;
};

// The document as JSON text (pretty-printed).
std::string metrics_json_text(const RunDescription& run, const std::vector<EpochMetrics>& history);
// Written atomically, so that a reader polling the file never sees half a document.
void write_metrics_json(const std::filesystem::path& path, const RunDescription& run,
                        const std::vector<EpochMetrics>& history);

// The "epochs" array alone, and back: checkpoints carry the history so that a resumed run's
// metrics file still lists every epoch. Parsing throws IoError naming `origin` on bad text.
std::string epochs_json_text(const std::vector<EpochMetrics>& history);
std::vector<EpochMetrics> parse_epochs_json(const std::string& text, const std::string& origin);

}  // namespace sublet::train
