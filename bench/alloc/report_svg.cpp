#include "bench/alloc/report_svg.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <string>
#include <vector>


namespace sublet::bench {
namespace {

constexpr double kWidth = 900, kHeight = 560;
constexpr double kLeft = 90, kRight = 290, kTop = 60, kBottom = 70;  // margins; legend on the right
constexpr std::array<const char*, 8> kColours = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                 "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// "1 ns", "10 ns", "1 us", "10 ms" for decade grid lines.
std::string ns_label(double ns) {
  if (ns < 1e3) return fmt::format("{:g} ns", ns);
  if (ns < 1e6) return fmt::format("{:g} us", ns / 1e3);
  if (ns < 1e9) return fmt::format("{:g} ms", ns / 1e6);
  return fmt::format("{:g} s", ns / 1e9);
}

// Compact tick labels for the benchmarked sizes (powers of two): "512 B", "4 KiB", "256 MiB".
std::string size_label(std::size_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < 1024 * 1024) return fmt::format("{:g} KiB", static_cast<double>(bytes) / 1024);
  return fmt::format("{:g} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

struct Axes {
  double log_size_min, log_size_max, log_ns_min, log_ns_max;
  double x(double size) const {
    return kLeft + (std::log2(size) - log_size_min) / (log_size_max - log_size_min) * (kWidth - kLeft - kRight);
  }
  double y(double ns) const {
    return kHeight - kBottom - (std::log10(ns) - log_ns_min) / (log_ns_max - log_ns_min) * (kHeight - kTop - kBottom);
  }
};

Axes axes_for(const AllocBenchResult& result) {
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const RowResult& row : result.rows)
    if (row.workload == "pair" || row.workload == "tensor")
      for (const CellResult& c : row.cells)
        if (c.ok && c.median_ns > 0) {
          lo = std::min(lo, c.median_ns);
          hi = std::max(hi, c.median_ns);
        }
  if (hi == 0) lo = hi = 100;  // nothing measured: an empty plot with sensible axes
  Axes a;
  // Half an octave of room on each side keeps the end points off the frame.
  a.log_size_min = std::log2(static_cast<double>(kPairSizes.front())) - 0.5;
  a.log_size_max = std::log2(static_cast<double>(kPairSizes.back())) + 0.5;
  a.log_ns_min = std::floor(std::log10(lo));
  a.log_ns_max = std::max(std::ceil(std::log10(hi)), a.log_ns_min + 1);
  return a;
}

std::string summary_of(const AllocBenchResult& result, const std::string& workload, const std::string& allocator) {
  for (const RowResult& row : result.rows) {
    if (row.workload != workload) continue;
    if (row.skipped) return workload + " skipped";
    const CellResult* c = row.cell(allocator);
    return c && c->ok ? fmt::format("{} {:.0f} ns", workload, c->median_ns) : workload + " failed";
  }
  return "";
}

// "tensor 312 / 845 ns" over the tensor rows in order; "tensor skipped" on the simulated device;
// "" without tensor rows.
std::string tensor_summary_of(const AllocBenchResult& result, const std::string& allocator) {
  std::vector<std::string> values;
  bool measured = false;
  for (const RowResult& row : result.rows) {
    if (row.workload != "tensor") continue;
    const CellResult* c = row.skipped ? nullptr : row.cell(allocator);
    measured = measured || !row.skipped;
    values.push_back(row.skipped ? "skipped" : c && c->ok ? fmt::format("{:.0f}", c->median_ns) : "failed");
  }
  if (values.empty()) return "";
  if (!measured) return "tensor skipped";
  std::string text = "tensor ";
  for (std::size_t i = 0; i < values.size(); ++i) text += (i ? " / " : "") + values[i];
  return text + " ns";
}

}  // namespace

std::string report_svg(const AllocBenchResult& result) {
  const Axes a = axes_for(result);
  const double plot_right = kWidth - kRight, plot_bottom = kHeight - kBottom;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kWidth, kHeight);
  // Two lines from the left margin: centred on the plot, the one long line ran past the left edge.
  svg += fmt::format("<text x=\"12\" y=\"24\" font-size=\"16\" font-weight=\"bold\">sublet bench alloc ({}): median ns "
                     "per allocate+free pair</text>\n<text x=\"12\" y=\"42\" font-size=\"12\">squares: tensor "
                     "create+destroy</text>\n",
                     bench_device_name(result.options.device));

  // Grid: a line per decade of ns and per benchmarked size.
  for (double d = a.log_ns_min; d <= a.log_ns_max + 1e-9; d += 1) {
    const double ns = std::pow(10.0, d), y = a.y(ns);
    svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", kLeft, y, plot_right, y);
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLeft - 8, y + 4, ns_label(ns));
  }
  for (const std::size_t size : kPairSizes) {
    const double x = a.x(static_cast<double>(size));
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#ddd\"/>\n", x, kTop, x, plot_bottom);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x, plot_bottom + 18,
                       escape(size_label(size)));
  }
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", kLeft, kTop,
                     plot_right - kLeft, plot_bottom - kTop);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">request size (log scale)</text>\n",
                     (kLeft + plot_right) / 2, kHeight - 22);
  svg += fmt::format("<text x=\"22\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 22 {0})\">ns per pair "
                     "(log scale)</text>\n",
                     (kTop + plot_bottom) / 2);

  for (std::size_t i = 0; i < result.allocators.size(); ++i) {
    const std::string& name = result.allocators[i].name;
    const char* colour = kColours[i % kColours.size()];
    std::string points, markers;
    for (const RowResult& row : result.rows) {
      const CellResult* c = row.workload == "pair" || row.workload == "tensor" ? row.cell(name) : nullptr;
      if (!c || !c->ok || c->median_ns <= 0) continue;
      const double x = a.x(static_cast<double>(row.size_bytes)), y = a.y(c->median_ns);
      if (row.workload == "tensor") {
        markers += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"8\" height=\"8\" fill=\"none\" stroke=\"{}\" "
                               "stroke-width=\"2\"><title>{} {}: {:.1f} ns</title></rect>\n",
                               x - 4, y - 4, colour, escape(name), escape(row.label), c->median_ns);
        continue;
      }
      points += fmt::format("{:.1f},{:.1f} ", x, y);
      markers += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"><title>{} {}: {:.1f} ns</title></circle>\n",
                             x, y, colour, escape(name), escape(row.label), c->median_ns);
    }
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n{}", points, colour, markers);
    const double ly = kTop + 10 + 56.0 * static_cast<double>(i), lx = plot_right + 20;
    svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"3\"/>\n", lx, ly, lx + 24, ly, colour);
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", lx + 32, ly + 4, escape(name));
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#555\">{}; {}</text>\n", lx + 32, ly + 20,
                       escape(summary_of(result, "churn", name)), escape(summary_of(result, "replay", name)));
    const std::string tensors = tensor_summary_of(result, name);
    if (!tensors.empty())
      svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#555\">{}</text>\n", lx + 32, ly + 34, escape(tensors));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace sublet::bench
