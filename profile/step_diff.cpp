#include "profile/step_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "memory/annotation.h"
#include "core/format_bytes.h"

namespace sublet::profile {
namespace {

using Key = std::tuple<std::string, Category, std::size_t>;  // annotation, category, block size

std::map<Key, std::int64_t> alive(const std::vector<memory::SegmentInfo>& segments) {
  std::map<Key, std::int64_t> blocks;
  for (const auto& s : segments)
    for (const auto& b : s.blocks)
      if (b.state != memory::BlockInfo::State::Inactive)
        ++blocks[{b.annotation ? memory::annotation_name(b.annotation) : "(no scope)", report_category(b.category), b.size}];
  return blocks;
}

// Blocks of `a` beyond those of `b`, grouped by (annotation, category).
std::vector<DiffGroup> surplus(const std::map<Key, std::int64_t>& a, const std::map<Key, std::int64_t>& b, std::int64_t* total) {
  std::map<std::pair<std::string, Category>, DiffGroup> groups;
  for (const auto& [key, count] : a) {
    auto it = b.find(key);
    const std::int64_t extra = count - (it == b.end() ? 0 : it->second);
    if (extra <= 0) continue;
    const auto& [annotation, category, size] = key;
    DiffGroup& g = groups[{annotation, category}];
    g.annotation = annotation;
    g.category = category;
    g.count += extra;
    g.bytes += extra * static_cast<std::int64_t>(size);
    *total += extra * static_cast<std::int64_t>(size);
  }
  std::vector<DiffGroup> list;
  for (auto& [key, g] : groups) list.push_back(g);
  std::sort(list.begin(), list.end(), [](const DiffGroup& x, const DiffGroup& y) { return x.bytes > y.bytes; });
  return list;
}

}  // namespace

StepDiff diff_steps(int earlier, const std::vector<memory::SegmentInfo>& after_earlier, int later,
                    const std::vector<memory::SegmentInfo>& after_later) {
  StepDiff d;
  d.earlier = earlier;
  d.later = later;
  const auto before = alive(after_earlier), after = alive(after_later);
  d.added = surplus(after, before, &d.added_bytes);
  d.removed = surplus(before, after, &d.removed_bytes);
  return d;
}

std::string format_step_diff(const StepDiff& d) {
  std::string out = fmt::format("Blocks alive after step {} that were not alive after step {} (matched by annotation, category and size):\n",
                                d.later, d.earlier);
  if (d.added.empty()) out += "  none: step " + std::to_string(d.later) + " leaves nothing behind that step " + std::to_string(d.earlier) + " did not.\n";
  for (const auto& g : d.added)
    out += fmt::format("  + {:>11} in {:>4} blocks  {:<16} {}\n", sublet::format_bytes(g.bytes), g.count, category_label(g.category), g.annotation);
  if (!d.added.empty()) out += fmt::format("  total {} more\n", sublet::format_bytes(d.added_bytes));
  out += fmt::format("Blocks alive after step {} that are gone after step {}:\n", d.earlier, d.later);
  if (d.removed.empty()) out += "  none\n";
  for (const auto& g : d.removed)
    out += fmt::format("  - {:>11} in {:>4} blocks  {:<16} {}\n", sublet::format_bytes(g.bytes), g.count, category_label(g.category), g.annotation);
  return out;
}

}  // namespace sublet::profile
