#pragma once
// The terminal display of `sublet train`: on a terminal one progress line per epoch redrawn in
// place with '\r' (at most ten times a second, so printing never costs training time); into a
// file or pipe a plain line every tenth of the epoch. Then one line per epoch:
//   epoch 1/2: train loss 0.4123, train acc 88.10%, test acc 95.30%, 412 img/s, peak allocated
//   61.25 MiB, peak reserved 80.00 MiB (4.9 s)
#include <chrono>
#include <cstdio>

#include "train/training_observer.h"

namespace sublet::train {

class ProgressPrinter : public TrainingObserver {
 public:
  // interactive: `out` is a terminal (isatty), so the line can be redrawn.
  ProgressPrinter(std::FILE* out, bool interactive);

  void step_finished(const StepProgress& progress) override;
  void epoch_finished(const EpochMetrics& metrics, std::int64_t epochs) override;
  void note(const std::string& message) override;

 private:
  void end_open_line();

  std::FILE* out_;
  bool interactive_;
  bool line_open_ = false;  // a '\r' progress line is on screen without its newline
  std::chrono::steady_clock::time_point last_draw_{};
  std::int64_t last_printed_tenth_ = -1;
};

}  // namespace sublet::train
