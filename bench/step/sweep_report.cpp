#include "bench/step/sweep_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/format_bytes.h"

namespace sublet::bench {
namespace {

std::string bytes(std::int64_t b) { return sublet::format_bytes(b); }

}  // namespace

void print_sweep_table(const std::vector<memory::SweepRow>& rows, const std::string& sample, std::ostream& out) {
  std::size_t label_width = 7;
  bool timed = false;
  for (const auto& r : rows) {
    label_width = std::max(label_width, r.label.size());
    timed = timed || r.us_per_sample.has_value();
  }
  out << fmt::format("{:<{}} {:>12} {:>13} {:>9} {:>12} {:>8} {:>13} {:>7} {:>4}", "setting", label_width,
                     "peak alloc", "peak reserved", "res/alloc", "unalloc@peak", "segments", "device allocs",
                     "retries", "OOMs")
      << (timed ? fmt::format(" {:>10}", "us/" + sample) : "") << "\n";
  for (const auto& r : rows) {
    out << fmt::format("{:<{}} {:>12} {:>13} {:>9.3f} {:>12} {:>8} {:>13} {:>7} {:>4}", r.label, label_width,
                       bytes(r.peak_allocated), bytes(r.peak_reserved), r.reserved_per_allocated(),
                       r.unallocated_at_peak ? bytes(*r.unallocated_at_peak) : "n/a", r.segments_created,
                       r.device_allocs, r.retries, r.ooms)
        << (timed ? fmt::format(" {:>10}", r.us_per_sample ? fmt::format("{:.3f}", *r.us_per_sample) : "n/a") : "")
        << "\n";
  }
  out << "res/alloc: peak reserved / peak allocated; unalloc@peak: reserved but in no allocated block right after "
         "reserved memory first reached its peak (holes + free segments + mapped but unused); segments: segments "
         "created; device allocs: backend allocation and mapping calls"
      << (timed ? "; us/" + sample + ": the timed steps' wall time per " + sample : "") << "\n";
}

nlohmann::json sweep_row_json(const memory::SweepRow& r, const std::string& sample) {
  return {{"label", r.label},
          {"alloc_conf", r.alloc_conf},
          {"peak_allocated_bytes", r.peak_allocated},
          {"peak_reserved_bytes", r.peak_reserved},
          {"reserved_per_allocated", r.reserved_per_allocated()},
          {"reserved_unallocated_at_peak_bytes",
           r.unallocated_at_peak ? nlohmann::json(*r.unallocated_at_peak) : nlohmann::json(nullptr)},
          {"segments_created", r.segments_created},
          {"device_allocations", r.device_allocs},
          {"alloc_retries", r.retries},
          {"ooms", r.ooms},
          {"us_per_" + sample, r.us_per_sample ? nlohmann::json(*r.us_per_sample) : nlohmann::json(nullptr)}};
}

}  // namespace sublet::bench
