#pragma once
// What one epoch of training produced: the numbers of the epoch line and of --metrics-json.
#include <cstddef>
#include <cstdint>

namespace sublet::train {

struct EpochMetrics {
  std::int64_t epoch = 0;          // 1-based
  double train_loss = 0.0;         // mean over the epoch's training images
  double train_acc = 0.0;          // fraction in [0, 1]
  double test_acc = 0.0;           // fraction in [0, 1]
  double img_per_s = 0.0;          // training images per second (training steps only)
  double seconds = 0.0;            // wall time of the epoch in this process, evaluation included
  std::size_t peak_allocated_bytes = 0;  // device allocator peaks over the epoch
  std::size_t peak_reserved_bytes = 0;
  std::int64_t batch_size = 0;     // at the end of the epoch (out-of-memory retries halve it)
  // The allocator's num_sync_all_streams at the end of the epoch (summed over data-parallel
  // ranks): device-wide synchronisations to free cached memory since the process started. A
  // training run wants 0 (stream-ordered reuse instead of waiting).
  std::int64_t device_syncs = 0;
  // GPT runs: an "epoch" is one evaluation interval. train_loss is then the mean next-token loss
  // (nats) of the interval's windows, img_per_s counts windows, and the accuracies are 0.
  bool language_model = false;
  std::int64_t step = 0;           // optimizer steps done at the evaluation
  double val_loss = 0.0;           // mean over the evaluated validation tokens, nats
  double val_perplexity = 0.0;     // exp(val_loss)
  double tokens_per_s = 0.0;       // training tokens per second (training steps only)
  std::int64_t tokens = 0;         // training tokens of the interval (windows x their lengths)
};

}  // namespace sublet::train
