#include "profile/segment_timeline.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <unordered_map>

#include "core/format_bytes.h"

namespace sublet::profile {
namespace {

constexpr std::size_t kSmallSegmentBytes = 2 * 1024 * 1024;  // the small pool's segment size

std::string bytes(std::size_t b) { return sublet::format_bytes(static_cast<std::int64_t>(b)); }

// The running state of one segment while the history is read.
struct Live {
  std::size_t mapped = 0;
  std::size_t blocks = 0;
  std::multiset<std::size_t> block_ends;  // offsets just past each live block
};

class Builder {
 public:
  explicit Builder(std::uint64_t event_count) { t_.event_count = event_count; }

  void on(const memory::HistoryEvent& e, std::uint64_t i) {
    using Kind = memory::AllocatorEventKind;
    switch (e.kind) {
      case Kind::SegmentAlloc: segment_alloc(e, i); break;
      case Kind::SegmentFree: segment_free(e, i); break;
      case Kind::SegmentMap: segment_map(e, i); break;
      case Kind::SegmentUnmap: segment_unmap(e, i); break;
      case Kind::Alloc: alloc(e, i); break;
      case Kind::FreeCompleted: free_completed(e, i); break;
      case Kind::Oom: pending_growths_.clear(); break;  // the request failed: no block to name
      default: break;
    }
  }

  SegmentTimeline finish() {
    for (auto& [address, index] : live_blocks_) t_.blocks[static_cast<std::size_t>(index)].end = t_.event_count;
    return std::move(t_);
  }

 private:
  int add_segment(std::uintptr_t base, bool expandable, std::uint64_t i) {
    TimelineSegment s;
    s.id = static_cast<int>(t_.segments.size()) + 1;
    s.base = base;
    s.expandable = expandable;
    s.created = i;
    s.released = t_.event_count;
    t_.segments.push_back(std::move(s));
    state_.emplace_back();
    return static_cast<int>(t_.segments.size()) - 1;
  }

  // Appends the segment's levels at event i when they changed.
  void update_levels(int index, std::uint64_t i) {
    TimelineSegment& s = t_.segments[static_cast<std::size_t>(index)];
    const Live& live = state_[static_cast<std::size_t>(index)];
    SegmentLevel level{i, 0, live.mapped};
    if (s.expandable) level.hole_top = live.block_ends.empty() ? 0 : *live.block_ends.rbegin();
    else level.hole_top = live.blocks > 0 ? live.mapped : 0;
    if (!s.levels.empty()) {
      SegmentLevel& last = s.levels.back();
      if (last.hole_top == level.hole_top && last.mapped == level.mapped) return;
      if (last.event == i) {
        last = level;
        return;
      }
    }
    s.levels.push_back(level);
  }

  void grew(int index, bool new_segment, std::size_t added, std::uint64_t i) {
    reserved_ += added;
    ReservedGrowth g;
    g.event = i;
    g.segment = index;
    g.new_segment = new_segment;
    g.bytes = added;
    g.reserved_after = reserved_;
    if (reserved_ > t_.peak_reserved) {
      t_.peak_reserved = reserved_;
      t_.peak_event = i;
      g.new_peak = true;
    }
    pending_growths_.push_back(t_.growths.size());
    t_.growths.push_back(g);
  }

  void segment_alloc(const memory::HistoryEvent& e, std::uint64_t i) {
    const int index = add_segment(e.address, false, i);
    TimelineSegment& s = t_.segments.back();
    s.extent = e.size;
    s.small_pool = e.size == kSmallSegmentBytes;
    state_.back().mapped = e.size;
    fixed_[e.address] = index;
    update_levels(index, i);
    grew(index, true, e.size, i);
  }

  void segment_free(const memory::HistoryEvent& e, std::uint64_t i) {
    const auto it = fixed_.find(e.address);
    if (it == fixed_.end()) return;  // taken before the history began
    const int index = it->second;
    fixed_.erase(it);
    Live& live = state_[static_cast<std::size_t>(index)];
    reserved_ -= std::min(reserved_, live.mapped);
    live.mapped = 0;
    t_.segments[static_cast<std::size_t>(index)].released = i;
    update_levels(index, i);
  }

  void segment_map(const memory::HistoryEvent& e, std::uint64_t i) {
    int index = -1;
    bool fresh = false;
    for (int candidate : expandable_) {  // one per pool and stream: a short list
      const TimelineSegment& s = t_.segments[static_cast<std::size_t>(candidate)];
      if (s.base + state_[static_cast<std::size_t>(candidate)].mapped == e.address) index = candidate;
    }
    if (index < 0) {
      index = add_segment(e.address, true, i);
      expandable_.push_back(index);
      fresh = true;
    }
    Live& live = state_[static_cast<std::size_t>(index)];
    TimelineSegment& s = t_.segments[static_cast<std::size_t>(index)];
    live.mapped += e.size;
    s.extent = std::max(s.extent, live.mapped);
    s.released = t_.event_count;
    update_levels(index, i);
    grew(index, fresh, e.size, i);
  }

  void segment_unmap(const memory::HistoryEvent& e, std::uint64_t i) {
    for (int index : expandable_) {
      TimelineSegment& s = t_.segments[static_cast<std::size_t>(index)];
      Live& live = state_[static_cast<std::size_t>(index)];
      if (e.address < s.base || e.address >= s.base + live.mapped) continue;
      const std::size_t keep = e.address - s.base;
      reserved_ -= std::min(reserved_, live.mapped - keep);
      live.mapped = keep;
      if (keep == 0) s.released = i;
      update_levels(index, i);
      return;
    }
  }

  // The segment whose live range holds `address`, or -1.
  int segment_holding(std::uintptr_t address) const {
    auto it = fixed_.upper_bound(address);
    if (it != fixed_.begin()) {
      --it;
      if (address < it->first + state_[static_cast<std::size_t>(it->second)].mapped) return it->second;
    }
    for (int index : expandable_) {
      const std::uintptr_t base = t_.segments[static_cast<std::size_t>(index)].base;
      if (address >= base && address < base + state_[static_cast<std::size_t>(index)].mapped) return index;
    }
    return -1;
  }

  void alloc(const memory::HistoryEvent& e, std::uint64_t i) {
    const int index = segment_holding(e.address);
    for (std::size_t g : pending_growths_) {
      ReservedGrowth& growth = t_.growths[g];
      growth.found = true;
      growth.request_event = i;
      growth.request_size = e.size;
      growth.request_requested = e.requested_size;
      growth.request_category = e.category;
      growth.request_annotation = e.annotation;
    }
    pending_growths_.clear();
    if (index < 0) {
      ++t_.unplaced_blocks;
      return;
    }
    TimelineBlock b;
    b.segment = index;
    b.offset = e.address - t_.segments[static_cast<std::size_t>(index)].base;
    b.size = e.size;
    b.requested = e.requested_size;
    b.begin = i;
    b.end = t_.event_count;
    b.category = e.category;
    b.annotation = e.annotation;
    live_blocks_[e.address] = static_cast<int>(t_.blocks.size());
    t_.blocks.push_back(b);
    Live& live = state_[static_cast<std::size_t>(index)];
    ++live.blocks;
    live.block_ends.insert(b.offset + b.size);
    update_levels(index, i);
  }

  void free_completed(const memory::HistoryEvent& e, std::uint64_t i) {
    const auto it = live_blocks_.find(e.address);
    if (it == live_blocks_.end()) return;
    TimelineBlock& b = t_.blocks[static_cast<std::size_t>(it->second)];
    live_blocks_.erase(it);
    b.end = i;
    b.category = e.category;  // the tag it ended with, as the history's replays use
    Live& live = state_[static_cast<std::size_t>(b.segment)];
    --live.blocks;
    live.block_ends.erase(live.block_ends.find(b.offset + b.size));
    update_levels(b.segment, i);
  }

  SegmentTimeline t_;
  std::vector<Live> state_;                    // parallel to t_.segments
  std::map<std::uintptr_t, int> fixed_;        // base -> segment, fixed segments alive now
  std::vector<int> expandable_;                // every expandable segment seen
  std::unordered_map<std::uintptr_t, int> live_blocks_;  // address -> index into t_.blocks
  std::vector<std::size_t> pending_growths_;   // growths whose request has not been seen yet
  std::size_t reserved_ = 0;
};

}  // namespace

std::string TimelineSegment::label() const {
  if (expandable) return fmt::format("segment {}: expandable, up to {} mapped", id, bytes(extent));
  return fmt::format("segment {}: {} {}", id, bytes(extent), small_pool ? "small" : "large");
}

SegmentTimeline build_segment_timeline(const std::vector<memory::HistoryEvent>& events) {
  Builder builder(events.size());
  for (std::size_t i = 0; i < events.size(); ++i) builder.on(events[i], i);
  return builder.finish();
}

}  // namespace sublet::profile
