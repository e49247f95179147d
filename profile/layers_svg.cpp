#include "profile/layers_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/format_bytes.h"
#include "profile/svg_document.h"

namespace sublet::profile {
namespace {

struct Bar {
  CategoryBytes net{};
  std::int64_t peak = 0;
  bool present = false;
};
struct Entry {
  std::string module;
  Bar forward, backward;  // backward also holds the optimizer phase
};

constexpr double kRowHeight = 14, kTop = 64, kLabelWidth = 210, kPanelWidth = 440, kGap = 60, kBottom = 60;

void add(Bar& bar, const LayerRow& r) {
  for (std::size_t c = 0; c < kNumCategories; ++c) bar.net[c] += r.net_by_category[c];
  bar.peak = std::max(bar.peak, r.peak_above_entry);
  bar.present = true;
}

}  // namespace

std::string layers_svg(const ProfileRun& run, const std::vector<LayerRow>& rows, int step) {
  // Leaf modules and spans outside the model, merged by name (a module called twice in a step
  // shows once), in the order of their first span.
  std::vector<Entry> entries;
  std::map<std::string, std::size_t> index;
  for (const LayerRow& r : rows) {
    if (r.step != step || !r.is_leaf) continue;
    auto [it, inserted] = index.emplace(r.module, entries.size());
    if (inserted) entries.push_back({r.module, {}, {}});
    add(r.phase == Phase::Forward ? entries[it->second].forward : entries[it->second].backward, r);
  }
  double low = 0, high = 1;
  for (const Entry& e : entries) {
    for (const Bar* b : {&e.forward, &e.backward}) {
      double pos = 0, neg = 0;
      for (auto v : b->net) (v > 0 ? pos : neg) += static_cast<double>(v);
      high = std::max({high, pos, static_cast<double>(b->peak)});
      low = std::min(low, neg);
    }
  }
  // Round both ends to axis values, so the ticks read 0, 1.5 MiB, 3 MiB rather than odd figures.
  high = nice_axis_max(high);
  if (low < 0) low = -nice_axis_max(-low);
  const double span = high - low;
  const double height = kTop + kRowHeight * static_cast<double>(entries.size()) + kBottom;
  const double width = kLabelWidth + 2 * kPanelWidth + kGap + 20;
  SvgDocument svg(width, height);
  svg.text(10, 20, fmt::format("{} on {}, step {}: net change (bars, by category) and peak above entry (black tick) per layer",
                               run.options.model_name, run.options.device.str(), step), 14, "start", "font-weight=\"bold\"");
  const double panel_x[2] = {kLabelWidth, kLabelWidth + kPanelWidth + kGap};
  const char* titles[2] = {"forward", "backward and optimizer"};
  const auto x_in = [&](int panel, double bytes) { return panel_x[panel] + kPanelWidth * (bytes - low) / span; };
  for (int p = 0; p < 2; ++p) {
    svg.text(panel_x[p] + kPanelWidth / 2, kTop - 22, titles[p], 12, "middle", "font-weight=\"bold\"");
    svg.line(x_in(p, 0), kTop - 4, x_in(p, 0), kTop + kRowHeight * static_cast<double>(entries.size()), "black");
    std::vector<double> ticks{0.0, high / 2, high};
    if (low < 0) ticks.insert(ticks.begin(), {low, low / 2});
    for (double tick : ticks) {
      const double x = x_in(p, tick);
      const double y = kTop + kRowHeight * static_cast<double>(entries.size()) + 14;
      svg.line(x, y - 12, x, y - 8, "black");
      svg.text(x, y + 2, fmt::format("{}{}", tick < 0 ? "-" : "", axis_label(std::abs(tick))), 9, "middle");
    }
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    const double y = kTop + kRowHeight * static_cast<double>(i);
    if (i % 2 == 1) svg.rect(0, y, width, kRowHeight, "#f4f4f4");
    svg.text(kLabelWidth - 6, y + kRowHeight - 3, e.module, 10, "end");
    for (int p = 0; p < 2; ++p) {
      const Bar& bar = p == 0 ? e.forward : e.backward;
      if (!bar.present) continue;
      double pos = 0, neg = 0;
      for (std::size_t c = 0; c < kNumCategories; ++c) {
        const double v = static_cast<double>(bar.net[c]);
        if (v == 0) continue;
        const double from = v > 0 ? pos : neg + v;
        const std::string title = fmt::format("{} {}: {} {}{}", e.module, p == 0 ? "fwd" : "bwd/optimizer",
                                              category_label(Category(c)), v > 0 ? "+" : "-",
                                              sublet::format_bytes(static_cast<std::int64_t>(std::abs(v))));
        svg.rect(x_in(p, from), y + 2, x_in(p, from + std::abs(v)) - x_in(p, from), kRowHeight - 4,
                 category_color(Category(c)), title);
        (v > 0 ? pos : neg) += v;
      }
      if (bar.peak > 0) {
        const double x = x_in(p, static_cast<double>(bar.peak));
        svg.line(x, y + 1, x, y + kRowHeight - 1, "black", 2.5);
      }
    }
  }
  // Legend.
  double lx = 10;
  const double ly = height - 22;
  for (std::size_t c = 0; c < kNumCategories; ++c) {
    svg.rect(lx, ly, 12, 10, category_color(Category(c)));
    svg.text(lx + 16, ly + 9, category_label(Category(c)), 10);
    lx += 24 + 7.0 * static_cast<double>(std::string(category_label(Category(c))).size());
  }
  svg.line(lx, ly - 1, lx, ly + 11, "black", 2.5);
  svg.text(lx + 6, ly + 9, "peak above the layer's entry", 10);
  return svg.str();
}

}  // namespace sublet::profile
