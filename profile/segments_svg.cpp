#include "profile/segments_svg.h"

#include <fmt/format.h>

#include "memory/annotation.h"
#include "core/format_bytes.h"
#include "profile/svg_document.h"

namespace sublet::profile {
namespace {

constexpr double kWidth = 1200, kLabelWidth = 230, kRowHeight = 22, kTop = 70, kBottom = 50;
constexpr const char* kFree = "#e3e3e3";

}  // namespace

std::string segments_svg(const ProfileRun& run, const ReplayedState& state, const std::string& title) {
  const double bar_width = kWidth - kLabelWidth - 20;
  const double height = kTop + kRowHeight * static_cast<double>(state.segments.size()) + kBottom;
  SvgDocument svg(kWidth, height);
  svg.text(10, 22, title, 14, "start", "font-weight=\"bold\"");
  svg.text(10, 42,
           fmt::format("{} segment{}, reserved {}, allocated {}, largest free block {}, fragmentation {:.1f}% "
                       "(1 - largest free block / free reserved)",
                       state.segments.size(), state.segments.size() == 1 ? "" : "s", sublet::format_bytes(static_cast<std::int64_t>(state.reserved)),
                       sublet::format_bytes(static_cast<std::int64_t>(state.allocated)),
                       sublet::format_bytes(static_cast<std::int64_t>(state.largest_free_block)), 100.0 * state.fragmentation),
           11);
  svg.text(10, 58, fmt::format("{} allocator; every segment is drawn full width", run.allocator_config.empty() ? "default" : run.allocator_config), 10);
  for (std::size_t i = 0; i < state.segments.size(); ++i) {
    const memory::SegmentInfo& s = state.segments[i];
    const double y = kTop + kRowHeight * static_cast<double>(i);
    svg.text(kLabelWidth - 8, y + kRowHeight - 8,
             fmt::format("{} {}{}: {} blocks", sublet::format_bytes(static_cast<std::int64_t>(s.total_size)),
                         s.is_small_pool ? "small" : "large", s.is_expandable ? " expandable" : "", s.blocks.size()),
             10, "end");
    const auto offset = [&](std::uintptr_t address) { return static_cast<double>(address - s.address) / static_cast<double>(s.total_size); };
    for (const memory::BlockInfo& b : s.blocks) {
      const double x = kLabelWidth + bar_width * offset(b.address);
      const double w = bar_width * static_cast<double>(b.size) / static_cast<double>(s.total_size);
      const bool allocated = b.state != memory::BlockInfo::State::Inactive;
      const std::string owner = allocated ? fmt::format("{} ({})", b.annotation ? memory::annotation_name(b.annotation) : "(no scope)",
                                                        category_label(report_category(b.category)))
                                          : "free";
      svg.rect(x, y + 3, w, kRowHeight - 6, allocated ? category_color(report_category(b.category)) : kFree,
               fmt::format("{}: {} (requested {})", owner, sublet::format_bytes(static_cast<std::int64_t>(b.size)),
                           sublet::format_bytes(static_cast<std::int64_t>(b.requested_size))),
               b.state == memory::BlockInfo::State::ActivePending ? "stroke=\"black\" stroke-dasharray=\"2,2\"" : "");
      if (w >= 1.5) svg.line(x, y + 3, x, y + kRowHeight - 3, "white", 0.8);  // block boundary: shows the splits
    }
    svg.rect(kLabelWidth, y + 3, bar_width, kRowHeight - 6, "none", "", "stroke=\"#555555\" stroke-width=\"0.6\"");
  }
  double lx = 10;
  const double ly = height - 24;
  for (std::size_t c = 0; c < kNumCategories; ++c) {
    svg.rect(lx, ly, 12, 10, category_color(Category(c)));
    svg.text(lx + 16, ly + 9, category_label(Category(c)), 10);
    lx += 24 + 7.0 * static_cast<double>(std::string(category_label(Category(c))).size());
  }
  svg.rect(lx, ly, 12, 10, kFree);
  svg.text(lx + 16, ly + 9, "free (cached, inactive)", 10);
  return svg.str();
}

}  // namespace sublet::profile
