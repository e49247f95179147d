#include "profile/memory_timeline_svg.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/format_bytes.h"
#include "profile/svg_document.h"

namespace sublet::profile {
namespace {

constexpr double kWidth = 1200, kHeight = 600;
constexpr double kLeft = 80, kRight = 190, kTop = 150, kBottom = 50;

const char* band_color(Phase phase, bool odd) {
  switch (phase) {
    case Phase::Forward: return odd ? "#d4e4f4" : "#e8f1fa";
    case Phase::Backward: return odd ? "#fbdcc0" : "#fdeee0";
    case Phase::Optimizer: return odd ? "#d3ebcf" : "#e6f4e3";
    case Phase::Recompute: return odd ? "#e4d4f0" : "#f1e8f8";
  }
  return "#eeeeee";
}

bool is_band(const LayerRow& r) { return r.depth == 1 || (r.depth == 0 && r.type.empty()); }

}  // namespace

std::string memory_timeline_svg(const ProfileRun& run, const std::vector<LayerRow>& rows, int step) {
  const StepRecord& record = run.steps.at(static_cast<std::size_t>(step - 1));
  const Accounting& a = run.accounting;
  const StepPeak peak = step_peak(record, a);
  const std::uint64_t first = record.begin_event, last = std::max(record.end_event, first + 1);
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  const double y_max = nice_axis_max(static_cast<double>(std::max<std::int64_t>(peak.peak_reserved, peak.peak_allocated)));
  // x: the number of allocations and frees before the event (segment and free_completed events
  // take no width), so every tensor's arrival or departure is one step to the right.
  std::vector<std::uint64_t> ordinal(last - first + 1, 0);
  for (std::uint64_t i = first; i < last; ++i) {
    const bool counted = i < record.end_event && (run.events[i].kind == memory::AllocatorEventKind::Alloc ||
                                                  run.events[i].kind == memory::AllocatorEventKind::FreeRequested);
    ordinal[i - first + 1] = ordinal[i - first] + (counted ? 1 : 0);
  }
  const double total = static_cast<double>(std::max<std::uint64_t>(ordinal.back(), 1));
  const auto x_of = [&](std::uint64_t event) {
    return kLeft + plot_w * static_cast<double>(ordinal[std::min(event, last) - first]) / total;
  };
  const auto y_of = [&](double bytes) { return kTop + plot_h * (1.0 - bytes / y_max); };

  SvgDocument svg(kWidth, kHeight);
  svg.text(kLeft, 22, fmt::format("{} on {}: memory over step {} (batch {}, allocator {})", run.options.model_name,
                                  run.options.device.str(), step, run.options.batch_size,
                                  run.allocator_config.empty() ? "default" : run.allocator_config), 15, "start", "font-weight=\"bold\"");

  // Layer bands. A label is drawn only where it clears the one before: rotated 9 px text needs
  // about 12 px along the axis (narrow neighbours such as "(loss) fwd" and "fc bwd" overlapped);
  // every band keeps its name in its tooltip.
  int band = 0;
  double last_label_x = -1e9;
  for (const LayerRow& r : rows) {
    if (r.step != step || !is_band(r) || r.end_event <= r.begin_event) continue;
    const double x0 = x_of(std::max(r.begin_event, first)), x1 = x_of(std::min(r.end_event, last));
    svg.rect(x0, kTop, x1 - x0, plot_h, band_color(r.phase, band++ % 2 == 1),
             fmt::format("{} {}: net {}, peak +{}", r.module, phase_name(r.phase), sublet::format_bytes(r.net),
                         sublet::format_bytes(r.peak_above_entry)));
    const double label_x = (x0 + x1) / 2;
    if (x1 - x0 >= 7 && label_x - last_label_x >= 12) {
      svg.text(label_x, kTop - 6, r.module + " " + phase_name(r.phase), 9, "start", "", -50);
      last_label_x = label_x;
    }
  }

  // Allocated bytes stacked by category, as step functions over the events.
  std::vector<std::vector<std::pair<double, double>>> upper(kNumCategories);
  const auto add_point = [&](std::uint64_t event, const CategoryBytes& live) {
    double sum = 0;
    for (std::size_t c = 0; c < kNumCategories; ++c) {
      sum += static_cast<double>(live[c]);
      upper[c].push_back({x_of(event), y_of(sum)});
    }
  };
  add_point(first, a.live_by_category_at(first));
  for (std::uint64_t i = first; i < record.end_event; ++i) {
    const auto kind = run.events[i].kind;
    if (kind != memory::AllocatorEventKind::Alloc && kind != memory::AllocatorEventKind::FreeRequested) continue;
    add_point(i, a.live_by_category_at(i));       // level before the event ...
    add_point(i + 1, a.live_by_category[i]);      // ... and after it
  }
  add_point(last, a.live_by_category_at(record.end_event));
  for (std::size_t c = kNumCategories; c-- > 0;) {
    std::vector<std::pair<double, double>> shape = upper[c];
    if (c == 0) {
      shape.push_back({x_of(last), y_of(0)});
      shape.push_back({x_of(first), y_of(0)});
    } else {
      shape.insert(shape.end(), upper[c - 1].rbegin(), upper[c - 1].rend());
    }
    svg.polygon(shape, category_color(Category(c)), category_label(Category(c)));
  }

  // Reserved memory.
  std::vector<std::pair<double, double>> reserved{{x_of(first), y_of(static_cast<double>(a.reserved_at(first)))}};
  for (std::uint64_t i = first; i < record.end_event; ++i) {
    if (reserved_change(run.events[i]) == 0) continue;
    reserved.push_back({x_of(i), y_of(static_cast<double>(a.reserved_at(i)))});
    reserved.push_back({x_of(i + 1), y_of(static_cast<double>(a.reserved[i]))});
  }
  reserved.push_back({x_of(last), y_of(static_cast<double>(a.reserved_at(record.end_event)))});
  svg.polyline(reserved, "#222222", 2);

  // Axes and ticks.
  svg.line(kLeft, kTop + plot_h, kLeft + plot_w, kTop + plot_h, "black");
  svg.line(kLeft, kTop, kLeft, kTop + plot_h, "black");
  for (int t = 0; t <= 5; ++t) {
    const double bytes = y_max * t / 5.0;
    svg.line(kLeft - 4, y_of(bytes), kLeft, y_of(bytes), "black");
    svg.line(kLeft, y_of(bytes), kLeft + plot_w, y_of(bytes), "#bbbbbb", 0.5, "stroke-dasharray=\"3,3\"");
    svg.text(kLeft - 7, y_of(bytes) + 4, axis_label(bytes), 10, "end");
  }
  svg.text(kLeft + plot_w / 2, kHeight - 14,
           fmt::format("allocations and frees of step {} in order ({} of them; bands: blue forward, orange backward, green optimizer)",
                       step, ordinal.back()), 11, "middle");

  // The peak and the innermost span that holds it.
  const LayerRow* holder = nullptr;
  for (const LayerRow& r : rows)
    if (r.step == step && r.holds_step_peak && r.begin_event <= peak.peak_event && peak.peak_event < r.end_event &&
        (!holder || r.depth > holder->depth || (r.depth == holder->depth && r.end_event - r.begin_event < holder->end_event - holder->begin_event)))
      holder = &r;
  const double px = x_of(peak.peak_event + 1), py = y_of(static_cast<double>(peak.peak_allocated));
  svg.line(px, py, px, kTop + plot_h, "black", 1, "stroke-dasharray=\"2,2\"");
  svg.circle(px, py, 5, "white", "step peak");
  const std::string label = fmt::format("peak {}{}", sublet::format_bytes(peak.peak_allocated),
                                        holder ? " in " + holder->module + " " + phase_name(holder->phase) : "");
  const bool right_half = px > kLeft + plot_w * 0.6;
  svg.text(right_half ? px - 8 : px + 8, std::max(py - 8, kTop + 12), label, 12, right_half ? "end" : "start", "font-weight=\"bold\"");

  // Legend.
  double ly = kTop + 4;
  const double lx = kLeft + plot_w + 16;
  svg.line(lx, ly + 5, lx + 14, ly + 5, "#222222", 2);
  svg.text(lx + 20, ly + 9, fmt::format("reserved (peak {})", sublet::format_bytes(peak.peak_reserved)), 10);
  ly += 20;
  svg.text(lx, ly + 9, "allocated, by category:", 10);
  ly += 16;
  for (std::size_t c = kNumCategories; c-- > 0;) {
    svg.rect(lx, ly, 14, 10, category_color(Category(c)));
    svg.text(lx + 20, ly + 9, category_label(Category(c)), 10);
    ly += 16;
  }
  return svg.str();
}

}  // namespace sublet::profile
