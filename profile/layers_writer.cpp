#include "profile/layers_writer.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/format_bytes.h"
#include "profile/output_file.h"

namespace sublet::profile {
namespace {

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string signed_bytes(std::int64_t bytes) {
  if (bytes == 0) return "0";
  return fmt::format("{}{}", bytes > 0 ? "+" : "-", sublet::format_bytes(bytes > 0 ? bytes : -bytes));
}

}  // namespace

void write_layers_csv(const std::string& path, const std::vector<LayerRow>& rows) {
  std::string out =
      "step,module,type,phase,depth,leaf,start_ms,duration_ms,allocated_at_entry,allocated_at_exit,net,"
      "peak_above_entry,bytes_allocated,count_allocated,bytes_freed,count_freed,reserved_change,device_allocs";
  for (std::size_t c = 0; c < kNumCategories; ++c) out += fmt::format(",allocated_{}", category_label(Category(c)));
  for (std::size_t c = 0; c < kNumCategories; ++c) out += fmt::format(",net_{}", category_label(Category(c)));
  out += ",holds_step_peak\n";
  for (const LayerRow& r : rows) {
    out += fmt::format("{},{},{},{},{},{},{:.3f},{:.3f},{},{},{},{},{},{},{},{},{},{}", r.step, csv_field(r.module),
                       csv_field(r.type), phase_name(r.phase), r.depth, r.is_leaf ? 1 : 0, r.start_ms, r.duration_ms,
                       r.allocated_at_entry, r.allocated_at_exit, r.net, r.peak_above_entry, r.bytes_allocated,
                       r.count_allocated, r.bytes_freed, r.count_freed, r.reserved_change, r.device_allocs);
    for (auto b : r.allocated_by_category) out += fmt::format(",{}", b);
    for (auto b : r.net_by_category) out += fmt::format(",{}", b);
    out += fmt::format(",{}\n", r.holds_step_peak ? 1 : 0);
  }
  write_text_file(path, out);
}

void write_layers_json(const std::string& path, const ProfileRun& run, const std::vector<LayerRow>& rows) {
  using nlohmann::json;
  json categories = json::array();
  for (std::size_t c = 0; c < kNumCategories; ++c) categories.push_back(category_label(Category(c)));
  json steps = json::array();
  for (const StepPeak& p : step_peaks(run)) {
    const StepRecord& s = run.steps.at(static_cast<std::size_t>(p.step - 1));
    steps.push_back({{"step", p.step},
                     {"peak_allocated", p.peak_allocated},
                     {"peak_reserved", p.peak_reserved},
                     {"allocated_at_start", p.allocated_at_start},
                     {"allocated_at_end", p.allocated_at_end},
                     {"duration_ms", 1e-6 * static_cast<double>(s.end_ns - s.begin_ns)},
                     {"loss", s.loss}});
  }
  json list = json::array();
  for (const LayerRow& r : rows) {
    json by_alloc = json::object(), by_net = json::object();
    for (std::size_t c = 0; c < kNumCategories; ++c) {
      by_alloc[category_label(Category(c))] = r.allocated_by_category[c];
      by_net[category_label(Category(c))] = r.net_by_category[c];
    }
    list.push_back({{"step", r.step},
                    {"module", r.module},
                    {"type", r.type},
                    {"phase", phase_name(r.phase)},
                    {"depth", r.depth},
                    {"leaf", r.is_leaf},
                    {"start_ms", r.start_ms},
                    {"duration_ms", r.duration_ms},
                    {"allocated_at_entry", r.allocated_at_entry},
                    {"allocated_at_exit", r.allocated_at_exit},
                    {"net", r.net},
                    {"peak_above_entry", r.peak_above_entry},
                    {"bytes_allocated", r.bytes_allocated},
                    {"count_allocated", r.count_allocated},
                    {"bytes_freed", r.bytes_freed},
                    {"count_freed", r.count_freed},
                    {"reserved_change", r.reserved_change},
                    {"device_allocs", r.device_allocs},
                    {"allocated_by_category", by_alloc},
                    {"net_by_category", by_net},
                    {"holds_step_peak", r.holds_step_peak}});
  }
  const json doc = {{"model", run.options.model_name},
                    {"device", run.options.device.str()},
                    {"batch_size", run.options.batch_size},
                    {"allocator_config", run.allocator_config},
                    {"categories", categories},
                    {"steps", steps},
                    {"rows", list}};
  write_text_file(path, doc.dump(1) + "\n");
}

std::string layers_table(const std::vector<LayerRow>& rows, int step) {
  std::string out = fmt::format("{:<34} {:<9} {:>10} {:>11} {:>11} {:>6} {:>11} {:>11} {:>11} {:>4}  {}\n", "module",
                                "phase", "entry", "net", "peak+", "allocs", "allocated", "freed", "reserved+", "dev",
                                "largest category (allocated)");
  for (const LayerRow& r : rows) {
    if (r.step != step) continue;
    std::string name = std::string(static_cast<std::size_t>(2 * r.depth), ' ') + r.module;
    if (name.size() > 33) name = name.substr(0, 31) + "..";
    std::size_t top = 0;
    for (std::size_t c = 1; c < kNumCategories; ++c)
      if (r.allocated_by_category[c] > r.allocated_by_category[top]) top = c;
    const std::string top_text = r.allocated_by_category[top] > 0
                                     ? fmt::format("{} {}", category_label(Category(top)), sublet::format_bytes(r.allocated_by_category[top]))
                                     : "";
    out += fmt::format("{:<34} {:<9} {:>10} {:>11} {:>11} {:>6} {:>11} {:>11} {:>11} {:>4}  {}\n",
                       fmt::format("{}{}", r.holds_step_peak ? "*" : " ", name), phase_name(r.phase), sublet::format_bytes(r.allocated_at_entry),
                       signed_bytes(r.net), signed_bytes(r.peak_above_entry), r.count_allocated,
                       sublet::format_bytes(r.bytes_allocated), sublet::format_bytes(r.bytes_freed),
                       signed_bytes(r.reserved_change), r.device_allocs, top_text);
  }
  return out;
}

}  // namespace sublet::profile
