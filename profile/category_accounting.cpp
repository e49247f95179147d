#include "profile/category_accounting.h"

#include <unordered_map>

namespace sublet::profile {

using memory::AllocatorEventKind;

Category report_category(memory::BlockCategory category) {
  switch (category) {
    case memory::BlockCategory::Parameter: return Category::Parameter;
    case memory::BlockCategory::Gradient: return Category::Gradient;
    case memory::BlockCategory::Activation: return Category::Activation;
    case memory::BlockCategory::OptimizerState: return Category::OptimizerState;
    case memory::BlockCategory::Workspace: return Category::Workspace;
    case memory::BlockCategory::Input: return Category::Input;
    case memory::BlockCategory::Communication: return Category::Communication;
    case memory::BlockCategory::Autocast: return Category::Autocast;
    case memory::BlockCategory::Temporary:
    case memory::BlockCategory::Unknown: return Category::Temporary;
  }
  return Category::Temporary;
}

const char* category_label(Category category) {
  switch (category) {
    case Category::Parameter: return "parameter";
    case Category::Gradient: return "gradient";
    case Category::Activation: return "activation";
    case Category::OptimizerState: return "optimizer_state";
    case Category::Workspace: return "workspace";
    case Category::Input: return "input";
    case Category::Temporary: return "temporary";
    case Category::Communication: return "communication";
    case Category::Autocast: return "autocast";
  }
  return "?";
}

bool is_device_alloc(AllocatorEventKind kind) {
  return kind == AllocatorEventKind::SegmentAlloc || kind == AllocatorEventKind::SegmentMap;
}

std::int64_t reserved_change(const memory::HistoryEvent& e) {
  const auto size = static_cast<std::int64_t>(e.size);
  switch (e.kind) {
    case AllocatorEventKind::SegmentAlloc:
    case AllocatorEventKind::SegmentMap: return size;
    case AllocatorEventKind::SegmentFree:
    case AllocatorEventKind::SegmentUnmap: return -size;
    default: return 0;
  }
}

Accounting account(const std::vector<memory::HistoryEvent>& events, const Baseline& baseline,
                   const std::vector<memory::SegmentInfo>& final_segments) {
  Accounting a;
  const std::size_t n = events.size();
  a.allocated.resize(n);
  a.reserved.resize(n);
  a.live_by_category.resize(n);
  a.category.assign(n, Category::Temporary);
  a.allocated_before = static_cast<std::int64_t>(baseline.allocated);
  a.reserved_before = static_cast<std::int64_t>(baseline.reserved);
  for (const auto& segment : baseline.segments)
    for (const auto& block : segment.blocks)
      if (block.state != memory::BlockInfo::State::Inactive)
        a.live_by_category_before[index_of(report_category(block.category))] += static_cast<std::int64_t>(block.size);

  // Final categories: pair each alloc with its free by address, in order.
  std::unordered_map<std::uintptr_t, std::size_t> live;  // address -> alloc event index
  for (std::size_t i = 0; i < n; ++i) {
    const auto& e = events[i];
    if (e.kind == AllocatorEventKind::Alloc) {
      live[e.address] = i;
    } else if (e.kind == AllocatorEventKind::FreeRequested) {
      a.category[i] = report_category(e.category);
      auto it = live.find(e.address);
      if (it != live.end()) {
        a.category[it->second] = a.category[i];
        live.erase(it);
      }
    }
  }
  std::unordered_map<std::uintptr_t, memory::BlockCategory> survivors;
  for (const auto& segment : final_segments)
    for (const auto& block : segment.blocks)
      if (block.state != memory::BlockInfo::State::Inactive) survivors[block.address] = block.category;
  for (const auto& [address, index] : live) {
    auto it = survivors.find(address);
    a.category[index] = report_category(it != survivors.end() ? it->second : events[index].category);
  }

  std::int64_t allocated = a.allocated_before, reserved = a.reserved_before;
  CategoryBytes by_category = a.live_by_category_before;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& e = events[i];
    const auto size = static_cast<std::int64_t>(e.size);
    if (e.kind == AllocatorEventKind::Alloc) {
      allocated += size;
      by_category[index_of(a.category[i])] += size;
    } else if (e.kind == AllocatorEventKind::FreeRequested) {
      allocated -= size;
      by_category[index_of(a.category[i])] -= size;
    }
    reserved += reserved_change(e);
    a.allocated[i] = allocated;
    a.reserved[i] = reserved;
    a.live_by_category[i] = by_category;
  }
  return a;
}

}  // namespace sublet::profile
