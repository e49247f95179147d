#pragma once
// summary.txt: the step peaks and where they happen, a static estimate of parameter, gradient,
// optimizer-state, input and activation bytes next to what was measured (with the differences
// explained: 512-byte rounding, workspaces, temporaries, caching), fragmentation, the step-2-vs-
// step-1 diff, the overhead of profiling, and memory_summary() at the peak and at the end.
#include <string>
#include <vector>

#include "profile/history_replay.h"
#include "profile/layer_rows.h"
#include "profile/step_diff.h"

namespace sublet::profile {

struct StaticEstimate {
  std::int64_t parameters = 0;       // sum of parameter sizes (numel x element size)
  std::int64_t gradients = 0;        // one gradient per parameter
  std::int64_t optimizer_state = 0;  // 1x parameters (SGD momentum) or 2x (Adam)
  std::int64_t input = 0;            // the batch and its labels
};
StaticEstimate static_estimate(const ProfileRun& run);

// "profiled step 12.30 ms (mean of 4, sd 0.40), unprofiled step ...: within the noise (+1.2% +- 6.1%)":
// the overhead and two standard errors of it; single steps or no unprofiled steps say so.
std::string overhead_line(const std::vector<double>& profiled_ms, const std::vector<double>& plain_ms);

// `peak_state`: the allocator rebuilt at the last step's peak.
std::string summary_report(const ProfileRun& run, const std::vector<LayerRow>& rows, const ReplayedState& peak_state,
                           const StepDiff* diff);

}  // namespace sublet::profile
