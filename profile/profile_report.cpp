#include "profile/profile_report.h"

#include <filesystem>

#include "analysis/replay.h"
#include "core/errors.h"
#include "profile/chrome_trace.h"
#include "profile/history_replay.h"
#include "profile/layers_svg.h"
#include "profile/layers_writer.h"
#include "profile/memory_timeline_svg.h"
#include "profile/memory_viz_snapshot.h"
#include "profile/output_file.h"
#include "profile/segment_map_svg.h"
#include "profile/segments_svg.h"
#include "profile/step_diff.h"
#include "profile/summary_report.h"
#include "profile/svg_document.h"

namespace sublet::profile {
namespace {

std::string html_page(const ProfileRun& run, const std::string& memory, const std::string& layers,
                      const std::string& segments, const std::string& segment_map, const std::string& table) {
  // The SVGs are inlined (without their XML declarations) so the page is one self-contained file.
  const auto inline_svg = [](const std::string& svg) { return svg.substr(svg.find("<svg")); };
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>sublet profile: " + xml_escape(run.options.model_name) +
         "</title>\n<style>body{font-family:sans-serif;margin:16px} pre{font-size:11px;overflow-x:auto}</style></head><body>\n"
         "<h1>sublet profile: " + xml_escape(run.options.model_name) + " on " + run.options.device.str() + "</h1>\n"
         "<h2>Memory over the last step</h2>\n" + inline_svg(memory) +
         "\n<h2>Per layer</h2>\n" + inline_svg(layers) +
         "\n<h2>Segments at the peak</h2>\n" + inline_svg(segments) +
         "\n<h2>Segments over the run</h2>\n" + inline_svg(segment_map) +
         "\n<h2>Layer table (last step)</h2>\n<pre>" + xml_escape(table) + "</pre>\n</body></html>\n";
}

// The whole run's segments over time, with the profiled steps (and their shapes) marked.
std::string segment_map(const ProfileRun& run) {
  SegmentMapOptions options;
  options.title = run.options.model_name + " on " + run.options.device.str() + ": segments over " +
                  std::to_string(run.steps.size()) + " profiled step" + (run.steps.size() == 1 ? "" : "s");
  options.subtitle = "allocator: " + (run.allocator_config.empty() ? std::string("PyTorch's default knobs") : run.allocator_config) +
                     " (" + run.allocator_config_origin + "); the model and optimizer set-up come before step 1";
  for (const StepRecord& step : run.steps)
    options.steps.push_back({step.begin_event, "step " + std::to_string(step.step), step.shape});
  return segment_map_svg(build_segment_timeline(run.events), options);
}

}  // namespace

const std::vector<std::string>& profile_file_names() {
  static const std::vector<std::string> names = {"layers.csv",  "layers.json",   "trace.json",       "snapshot.pickle",
                                                 "memory.svg",  "memory.html",   "layers.svg",       "segments.svg",
                                                 "segment_map.svg", "summary.txt", "alloc_trace.json", "step_diff.txt"};
  return names;
}

ProfileReport write_profile(const ProfileRun& run, const std::string& directory) {
  if (run.steps.empty()) throw ValueError("profile: nothing was profiled");
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  if (ec) throw IoError(directory + ": cannot create the output folder (" + ec.message() + ")");
  const auto path = [&](const std::string& name) { return (std::filesystem::path(directory) / name).string(); };
  ProfileReport report;
  report.rows = layer_rows(run);
  const int last = run.steps.back().step;
  report.table = layers_table(report.rows, last);

  write_layers_csv(path("layers.csv"), report.rows);
  write_layers_json(path("layers.json"), run, report.rows);
  write_chrome_trace(path("trace.json"), run, report.rows);
  write_memory_viz_snapshot(path("snapshot.pickle"), run);
  memory::save_trace(path("alloc_trace.json"), memory::trace_from_history(run.events));

  const StepPeak peak = step_peak(run.steps.back(), run.accounting);
  const ReplayedState at_peak = replay_through(run, peak.peak_event);
  const std::string memory_svg = memory_timeline_svg(run, report.rows, last);
  const std::string layers = layers_svg(run, report.rows, last);
  const std::string segments = segments_svg(
      run, at_peak,
      run.options.model_name + " on " + run.options.device.str() + ": segments at step " + std::to_string(last) + "'s peak");
  write_text_file(path("memory.svg"), memory_svg);
  write_text_file(path("layers.svg"), layers);
  const std::string map = segment_map(run);
  write_text_file(path("segments.svg"), segments);
  write_text_file(path("segment_map.svg"), map);
  write_text_file(path("memory.html"), html_page(run, memory_svg, layers, segments, map, report.table));

  std::unique_ptr<StepDiff> diff;
  if (run.steps.size() >= 2) {
    diff = std::make_unique<StepDiff>(diff_steps(1, run.steps[0].segments_at_end, 2, run.steps[1].segments_at_end));
    write_text_file(path("step_diff.txt"), format_step_diff(*diff));
  }
  report.summary = summary_report(run, report.rows, at_peak, diff.get());
  write_text_file(path("summary.txt"), report.summary);
  for (const std::string& name : profile_file_names())
    if (diff || name != "step_diff.txt") report.files.push_back(path(name));
  return report;
}

}  // namespace sublet::profile
