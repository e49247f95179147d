#pragma once
// What the Trainer reports while it runs, for a progress display (progress.h) or a test.
#include <cstddef>
#include <cstdint>
#include <string>

#include "train/epoch_metrics.h"

namespace sublet::train {

struct StepProgress {
  std::int64_t epoch = 0;          // 1-based
  std::int64_t epochs = 0;
  std::int64_t batches_done = 0;   // in this epoch
  std::int64_t batches_total = 0;  // in this epoch at the current batch size
  double mean_loss = 0.0;          // over the epoch's images so far
  double img_per_s = 0.0;          // this epoch's training throughput so far
  std::size_t allocated_bytes = 0;
  std::size_t peak_allocated_bytes = 0;
  std::size_t reserved_bytes = 0;
  std::size_t peak_reserved_bytes = 0;
  // GPT runs: the step count in the whole run, and tokens per second (img_per_s counts windows),
  // and the shape of the step just trained (its input's windows and their length).
  bool language_model = false;
  std::int64_t step = 0;
  std::int64_t steps = 0;
  double tokens_per_s = 0.0;
  std::int64_t step_batch = 0;
  std::int64_t step_seq_len = 0;
};

class TrainingObserver {
 public:
  virtual ~TrainingObserver() = default;
  virtual void step_finished(const StepProgress& /*progress*/) {}
  virtual void epoch_finished(const EpochMetrics& /*metrics*/, std::int64_t /*epochs*/) {}
  // Events worth a line of their own: an out-of-memory retry, a checkpoint written, a resume.
  virtual void note(const std::string& /*message*/) {}
};

}  // namespace sublet::train
