#include "profile/recompute_curve_svg.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/format_bytes.h"
#include "profile/svg_document.h"

namespace sublet::profile {

std::string recompute_curve_svg(const std::string& title, const std::vector<RecomputeCurvePoint>& points,
                                std::size_t baseline_peak, double forward_ms) {
  constexpr double kWidth = 720, kHeight = 420, kLeft = 80, kRight = 30, kTop = 50, kBottom = 60;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  double max_ms = std::max(forward_ms, 1e-3);
  for (const auto& p : points)
    if (p.fits) max_ms = std::max(max_ms, p.recompute_ms);
  max_ms *= 1.1;
  const double max_bytes = nice_axis_max(static_cast<double>(baseline_peak) * 1.05);
  auto x_of = [&](double bytes) { return kLeft + plot_w * bytes / max_bytes; };
  auto y_of = [&](double ms) { return kTop + plot_h * (1.0 - ms / max_ms); };

  SvgDocument svg(kWidth, kHeight);
  svg.text(kLeft, 24, title, 14, "start", "font-weight=\"bold\"");
  svg.line(kLeft, kTop + plot_h, kLeft + plot_w, kTop + plot_h, "#333");
  svg.line(kLeft, kTop, kLeft, kTop + plot_h, "#333");
  for (int i = 0; i <= 4; ++i) {
    const double bytes = max_bytes * i / 4, ms = max_ms * i / 4;
    svg.line(x_of(bytes), kTop + plot_h, x_of(bytes), kTop + plot_h + 4, "#333");
    svg.text(x_of(bytes), kTop + plot_h + 18, axis_label(bytes), 10, "middle");
    svg.line(kLeft - 4, y_of(ms), kLeft, y_of(ms), "#333");
    svg.text(kLeft - 8, y_of(ms) + 4, fmt::format("{:.1f} ms", ms), 10, "end");
  }
  svg.text(kLeft + plot_w / 2, kHeight - 14, "memory budget (peak allocated bytes)", 11, "middle");
  svg.text(18, kTop + plot_h / 2, "extra forward time per step", 11, "middle", "", -90);
  // The unbudgeted peak and the whole forward, for scale.
  svg.line(x_of(static_cast<double>(baseline_peak)), kTop, x_of(static_cast<double>(baseline_peak)), kTop + plot_h,
           "#999", 1, "stroke-dasharray=\"4 3\"");
  svg.text(x_of(static_cast<double>(baseline_peak)) - 4, kTop + 12, "no recomputation", 10, "end");
  if (forward_ms > 0) {
    svg.line(kLeft, y_of(forward_ms), kLeft + plot_w, y_of(forward_ms), "#999", 1, "stroke-dasharray=\"4 3\"");
    svg.text(kLeft + 6, y_of(forward_ms) - 4, fmt::format("one whole forward ({:.1f} ms)", forward_ms), 10);
  }
  std::vector<std::pair<double, double>> line;
  std::vector<RecomputeCurvePoint> sorted = points;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.budget_bytes < b.budget_bytes; });
  for (const auto& p : sorted)
    if (p.fits) line.emplace_back(x_of(static_cast<double>(p.budget_bytes)), y_of(p.recompute_ms));
  if (line.size() > 1) svg.polyline(line, "#1f77b4", 2);
  for (const auto& p : sorted) {
    const double x = x_of(static_cast<double>(p.budget_bytes));
    const std::string budget = format_bytes(static_cast<std::int64_t>(p.budget_bytes));
    if (p.fits) {
      svg.circle(x, y_of(p.recompute_ms), 4, "#1f77b4",
                 fmt::format("budget {}: +{:.2f} ms, peak {} predicted; recomputing {}", budget, p.recompute_ms,
                             format_bytes(static_cast<std::int64_t>(p.predicted_peak)), p.recomputed));
    } else {
      svg.text(x, kTop + 10, "x", 12, "middle", "fill=\"#d62728\"");
      svg.rect(x - 5, kTop, 10, 14, "transparent",
               fmt::format("budget {}: nothing fits (smallest peak reachable {})", budget,
                           format_bytes(static_cast<std::int64_t>(p.predicted_peak))));
    }
  }
  return svg.str();
}

}  // namespace sublet::profile
