#pragma once
// The --metrics-json file:
//   {"model": "resnet20", "device": "cpu", "data": "mnist",
//    "epochs": [{"epoch": 1, "train_loss": ..., "train_acc": ..., "test_acc": ..., "img_per_s": ...,
//                "peak_allocated_bytes": ..., "peak_reserved_bytes": ..., "seconds": ..., "batch_size": ...}],
//    "final_test_acc": ...}
// Accuracies are fractions in [0, 1]; final_test_acc is the last epoch's (null before any epoch).
#include <filesystem>
#include <string>
#include <vector>

#include "train/epoch_metrics.h"

namespace sublet::train {

struct RunDescription {
  std::string model;
  std::string device;
  std::string data;
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
