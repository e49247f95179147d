#include "profile/segment_map_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "core/format_bytes.h"
#include "memory/annotation.h"
#include "profile/category_accounting.h"
#include "profile/svg_document.h"

namespace sublet::profile {
namespace {

constexpr double kWidth = 1400, kLabelWidth = 250, kRight = 20, kPlotTop = 112, kLaneGap = 3;
constexpr double kLanesHeight = 640, kMinLane = 8, kLabelMinLane = 10;
constexpr std::size_t kMaxLanes = 400;        // more segments than this: the rest are counted, not drawn
constexpr std::size_t kMaxBlockRects = 40000; // the widest blocks first; the rest are sub-pixel anyway
constexpr std::size_t kMaxGrowthRows = 40;
constexpr const char* kHole = "#bfe0f5";
constexpr const char* kUnused = "#d9d9d9";
constexpr const char* kGrowth = "#d62728";

std::string bytes(std::size_t b) { return sublet::format_bytes(static_cast<std::int64_t>(b)); }

struct Lane {
  const TimelineSegment* segment = nullptr;
  double top = 0, height = 0;
};

class Plot {
 public:
  Plot(const SegmentTimeline& t) : t_(t), width_(kWidth - kLabelWidth - kRight) {}
  double x(std::uint64_t event) const {
    return kLabelWidth + width_ * static_cast<double>(event) / static_cast<double>(std::max<std::uint64_t>(1, t_.event_count));
  }
  double width() const { return width_; }
  // y of `offset` bytes into the lane (address grows downward, as in a memory dump).
  static double y(const Lane& lane, std::size_t offset) {
    return lane.top + lane.height * static_cast<double>(offset) / static_cast<double>(std::max<std::size_t>(1, lane.segment->extent));
  }

 private:
  const SegmentTimeline& t_;
  double width_;
};

// The step holding `event`, or nullptr before the first step.
const SegmentMapStep* step_of(const std::vector<SegmentMapStep>& steps, std::uint64_t event) {
  auto it = std::upper_bound(steps.begin(), steps.end(), event,
                             [](std::uint64_t e, const SegmentMapStep& s) { return e < s.first_event; });
  return it == steps.begin() ? nullptr : &*std::prev(it);
}

std::string where(const std::vector<SegmentMapStep>& steps, std::uint64_t event) {
  const SegmentMapStep* s = step_of(steps, event);
  if (!s) return steps.empty() ? "" : "before the first step";
  return s->shape.empty() ? s->label : s->label + " (" + s->shape + ")";
}

std::string request_text(const ReservedGrowth& g) {
  if (!g.found) return "no request followed";
  const std::string scope = g.request_annotation ? memory::annotation_name(g.request_annotation) : "";
  return fmt::format("request {} (block {}, {}{})", bytes(g.request_requested), bytes(g.request_size),
                     category_label(report_category(g.request_category)), scope.empty() ? "" : ", " + scope);
}

std::string growth_text(const SegmentTimeline& t, const ReservedGrowth& g) {
  const TimelineSegment& s = t.segments[static_cast<std::size_t>(g.segment)];
  if (!s.expandable) return fmt::format("new segment {} ({} {})", s.id, bytes(g.bytes), s.small_pool ? "small" : "large");
  return fmt::format("{} mapped onto expandable segment {}", bytes(g.bytes), s.id);
}

// Each level's [begin, end) spread over pixel columns, keeping the largest values a column sees,
// so that a lane costs a rectangle per run of equal columns, not one per event.
struct Columns {
  std::vector<std::size_t> mapped, hole;
};

Columns columns_of(const TimelineSegment& s, const Plot& plot, std::size_t n) {
  Columns c{std::vector<std::size_t>(n, 0), std::vector<std::size_t>(n, 0)};
  for (std::size_t k = 0; k < s.levels.size(); ++k) {
    const SegmentLevel& level = s.levels[k];
    const std::uint64_t end = k + 1 < s.levels.size() ? s.levels[k + 1].event : s.released;
    const double x0 = plot.x(level.event) - kLabelWidth, x1 = plot.x(std::max(end, level.event + 1)) - kLabelWidth;
    const auto c0 = static_cast<std::size_t>(std::clamp(std::floor(x0), 0.0, static_cast<double>(n - 1)));
    const auto c1 = static_cast<std::size_t>(std::clamp(std::ceil(x1) - 1, static_cast<double>(c0), static_cast<double>(n - 1)));
    for (std::size_t col = c0; col <= c1; ++col) {
      c.mapped[col] = std::max(c.mapped[col], level.mapped);
      c.hole[col] = std::max(c.hole[col], level.hole_top);
    }
  }
  return c;
}

void draw_lane_background(SvgDocument& svg, const Lane& lane, const Plot& plot) {
  const TimelineSegment& s = *lane.segment;
  const std::size_t n = static_cast<std::size_t>(plot.width());
  const Columns c = columns_of(s, plot, n);
  const auto runs = [&](const std::vector<std::size_t>& values, const char* fill, const std::string& title) {
    for (std::size_t begin = 0; begin < n;) {
      std::size_t end = begin + 1;
      while (end < n && values[end] == values[begin]) ++end;
      if (values[begin] > 0)
        svg.rect(kLabelWidth + static_cast<double>(begin), lane.top, static_cast<double>(end - begin),
                 Plot::y(lane, values[begin]) - lane.top, fill, title);
      begin = end;
    }
  };
  svg.rect(plot.x(s.created), lane.top, plot.x(s.released) - plot.x(s.created), lane.height, "white", s.label(),
           "stroke=\"#999999\" stroke-width=\"0.5\"");
  runs(c.mapped, kUnused, s.label() + ": reserved, free (no live block above)");
  runs(c.hole, kHole, s.label() + ": hole (free, below a live block)");
}

void draw_blocks(SvgDocument& svg, const SegmentTimeline& t, const std::vector<Lane>& lanes, const Plot& plot,
                 std::size_t* not_drawn) {
  struct Candidate {
    const TimelineBlock* block;
    double x, y, w, h;
  };
  std::vector<Candidate> candidates;
  for (const TimelineBlock& b : t.blocks) {
    if (static_cast<std::size_t>(b.segment) >= lanes.size()) continue;
    const Lane& lane = lanes[static_cast<std::size_t>(b.segment)];
    const double x0 = plot.x(b.begin), x1 = plot.x(b.end);
    const double y0 = Plot::y(lane, b.offset), y1 = Plot::y(lane, b.offset + b.size);
    candidates.push_back({&b, x0, y0, std::max(x1 - x0, 0.3), std::max(y1 - y0, 0.3)});
  }
  if (candidates.size() > kMaxBlockRects) {
    std::nth_element(candidates.begin(), candidates.begin() + kMaxBlockRects, candidates.end(),
                     [](const Candidate& a, const Candidate& b) { return a.w * a.h > b.w * b.h; });
    *not_drawn = candidates.size() - kMaxBlockRects;
    candidates.resize(kMaxBlockRects);
  }
  for (const Candidate& c : candidates) {
    const TimelineBlock& b = *c.block;
    const Category category = report_category(b.category);
    const std::string scope = b.annotation ? memory::annotation_name(b.annotation) : "(no scope)";
    svg.rect(c.x, c.y, c.w, c.h, category_color(category),
             fmt::format("{} ({}): {} (requested {}), events {}-{}", scope, category_label(category), bytes(b.size),
                         bytes(b.requested), b.begin, b.end));
  }
}

void draw_steps(SvgDocument& svg, const std::vector<SegmentMapStep>& steps, const Plot& plot, double bottom) {
  double last_label_end = -1e9;
  for (const SegmentMapStep& s : steps) {
    const double x = plot.x(s.first_event);
    svg.line(x, kPlotTop - 30, x, bottom, "#777777", 0.6, "stroke-dasharray=\"3,3\"");
    const double label_width = 6.0 * static_cast<double>(std::max(s.label.size(), s.shape.size()));
    if (x < last_label_end) continue;  // crowded: the line stays, the label waits for room
    svg.text(x + 3, kPlotTop - 20, s.label, 10);
    if (!s.shape.empty()) svg.text(x + 3, kPlotTop - 9, s.shape, 9, "start", "fill=\"#555555\"");
    last_label_end = x + label_width + 8;
  }
}

// Red ticks on the lane that grew; numbered triangles above the plot where reserved reached a new
// peak (the numbers are the rows of the table below).
void draw_growths(SvgDocument& svg, const SegmentTimeline& t, const std::vector<Lane>& lanes, const Plot& plot,
                  const std::vector<SegmentMapStep>& steps) {
  double last_number_end = -1e9;
  for (std::size_t k = 0; k < t.growths.size(); ++k) {
    const ReservedGrowth& g = t.growths[k];
    const double x = plot.x(g.event);
    const std::string title = fmt::format("#{} event {}{}: {} for {}; reserved now {}{}", k + 1, g.event,
                                          steps.empty() ? "" : ", " + where(steps, g.event), growth_text(t, g),
                                          request_text(g), bytes(g.reserved_after), g.new_peak ? " (new peak)" : "");
    if (static_cast<std::size_t>(g.segment) < lanes.size()) {
      const Lane& lane = lanes[static_cast<std::size_t>(g.segment)];
      svg.line(x, lane.top - 1, x, lane.top + lane.height + 1, kGrowth, 1.2);
    }
    if (!g.new_peak) continue;
    svg.polygon({{x - 4, kPlotTop - 44}, {x + 4, kPlotTop - 44}, {x, kPlotTop - 36}}, kGrowth, title);
    if (x >= last_number_end) {
      svg.text(x, kPlotTop - 47, fmt::format("#{}", k + 1), 9, "middle", fmt::format("fill=\"{}\"", kGrowth));
      last_number_end = x + 22;
    }
  }
}

}  // namespace

std::string segment_map_svg(const SegmentTimeline& t, const SegmentMapOptions& options) {
  const Plot plot(t);
  // Lanes: each as tall as its share of all segments' bytes, at least kMinLane.
  const std::size_t lane_count = std::min(t.segments.size(), kMaxLanes);
  std::size_t total = 0;
  for (std::size_t i = 0; i < lane_count; ++i) total += t.segments[i].extent;
  std::vector<Lane> lanes;
  double y = kPlotTop;
  for (std::size_t i = 0; i < lane_count; ++i) {
    const double share = total > 0 ? static_cast<double>(t.segments[i].extent) / static_cast<double>(total) : 0;
    lanes.push_back({&t.segments[i], y, std::max(kMinLane, kLanesHeight * share)});
    y += lanes.back().height + kLaneGap;
  }
  const double plot_bottom = y;
  std::size_t peak_rows = 0;
  for (const ReservedGrowth& g : t.growths) peak_rows += g.new_peak ? 1 : 0;
  const std::size_t table_rows = std::min(t.growths.size(), kMaxGrowthRows) + 2;
  const double height = plot_bottom + 70 + 14.0 * static_cast<double>(table_rows) + 20;

  SvgDocument svg(kWidth, height);
  svg.text(10, 20, options.title, 14, "start", "font-weight=\"bold\"");
  svg.text(10, 37, options.subtitle, 10);
  svg.text(10, 52,
           fmt::format("{} segment{}, peak reserved {} (first at event {}); reserved grew {} time{}, {} of them to a new "
                       "peak (red marks, numbered as the table below)",
                       t.segments.size(), t.segments.size() == 1 ? "" : "s", bytes(t.peak_reserved), t.peak_event,
                       t.growths.size(), t.growths.size() == 1 ? "" : "s", peak_rows),
           10);

  for (const Lane& lane : lanes) {
    draw_lane_background(svg, lane, plot);
    // "segment 1: expandable, up to 86.00 MiB mapped" is wider than the label column: two lines
    // where the lane has room for them.
    const std::string label = lane.segment->label();
    const auto comma = label.find(", ");
    if (comma != std::string::npos && lane.height >= 2 * kLabelMinLane + 4) {
      svg.text(kLabelWidth - 6, lane.top + 12, label.substr(0, comma), 10, "end");
      svg.text(kLabelWidth - 6, lane.top + 25, label.substr(comma + 2), 10, "end");
    } else if (lane.height >= kLabelMinLane) {
      svg.text(kLabelWidth - 6, lane.top + std::min(lane.height, 20.0) / 2 + 4, label, 10, "end");
    }
  }
  std::size_t not_drawn = 0;
  draw_blocks(svg, t, lanes, plot, &not_drawn);
  draw_steps(svg, options.steps, plot, plot_bottom);
  draw_growths(svg, t, lanes, plot, options.steps);

  // The axis and the legend.
  double ly = plot_bottom + 14;
  svg.text(kLabelWidth, ly, fmt::format("allocator events 0 .. {} in order (allocations, frees, segment calls); "
                                        "y: address inside each segment, from its base downward",
                                        t.event_count),
           10);
  if (t.segments.size() > lanes.size() || not_drawn > 0 || t.unplaced_blocks > 0)
    svg.text(kLabelWidth, ly + 13,
             fmt::format("not drawn: {} segments beyond the first {}, {} of the smallest short-lived blocks, {} blocks "
                         "outside known segments",
                         t.segments.size() - lanes.size(), lanes.size(), not_drawn, t.unplaced_blocks),
             9, "start", "fill=\"#555555\"");
  ly += 30;
  double lx = 10;
  const auto legend = [&](const char* fill, const std::string& label) {
    svg.rect(lx, ly - 9, 12, 10, fill, "", "stroke=\"#999999\" stroke-width=\"0.5\"");
    svg.text(lx + 16, ly, label, 10);
    lx += 26 + 6.2 * static_cast<double>(label.size());
  };
  std::array<bool, kNumCategories> used{};
  for (const TimelineBlock& b : t.blocks) used[static_cast<std::size_t>(report_category(b.category))] = true;
  for (std::size_t c = 0; c < kNumCategories; ++c)
    if (used[c]) legend(category_color(Category(c)), std::string("live: ") + category_label(Category(c)));
  legend(kHole, "hole (free, below a live block)");
  legend(kUnused, "reserved, free above every live block");
  legend("white", "unmapped");
  legend(kGrowth, "reserved grew");

  ly += 22;
  svg.text(10, ly, "Where reserved memory grew (new peaks first):", 11, "start", "font-weight=\"bold\"");
  std::vector<std::size_t> order(t.growths.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_partition(order.begin(), order.end(), [&](std::size_t k) { return t.growths[k].new_peak; });
  if (order.size() > kMaxGrowthRows) {
    std::sort(order.begin(), order.begin() + kMaxGrowthRows);
    order.resize(kMaxGrowthRows);
  } else {
    std::sort(order.begin(), order.end());
  }
  for (std::size_t k : order) {
    const ReservedGrowth& g = t.growths[k];
    ly += 14;
    const std::string at = where(options.steps, g.event);
    svg.text(10, ly,
             fmt::format("#{} event {}{}: {} for {}; reserved {}{}", k + 1, g.event, at.empty() ? "" : ", " + at,
                         growth_text(t, g), request_text(g), bytes(g.reserved_after), g.new_peak ? " (new peak)" : ""),
             10, "start", g.new_peak ? fmt::format("fill=\"{}\"", kGrowth) : "");
  }
  if (t.growths.size() > kMaxGrowthRows)
    svg.text(10, ly + 14, fmt::format("... and {} more growths, not listed", t.growths.size() - kMaxGrowthRows), 10);
  return svg.str();
}

}  // namespace sublet::profile
