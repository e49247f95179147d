#pragma once
// Writes every output of a profiled run into one folder:
//   layers.csv, layers.json   the layer table (one row per step, module and phase)
//   trace.json                Chrome trace events (Perfetto, chrome://tracing)
//   snapshot.pickle           segments and history in memory_viz's layout
//   memory.svg, memory.html   memory over the last step; the page embeds all three plots
//   layers.svg, segments.svg  per-layer net/peak by category; the segment map at the peak
//   segment_map.svg           the segments over the whole run: blocks, holes, where reserved grew
//   summary.txt               peaks, static estimate vs measured, fragmentation, step diff,
//                             overhead, memory_summary() at the peak and at the end
//   step_diff.txt             step 2 against step 1 (when two steps or more were profiled)
//   alloc_trace.json          the run's allocation trace, for `sublet replay`
#include <string>
#include <vector>

#include "profile/layer_rows.h"
#include "profile/profile_session.h"

namespace sublet::profile {

struct ProfileReport {
  std::vector<LayerRow> rows;
  std::string table;      // the last step's layer table, for the terminal
  std::string summary;    // summary.txt's text
  std::vector<std::string> files;
};

ProfileReport write_profile(const ProfileRun& run, const std::string& directory);

// Every file write_profile may write into its folder (step_diff.txt only with two steps or more),
// so that a caller can check each path before the run.
const std::vector<std::string>& profile_file_names();

}  // namespace sublet::profile
