#pragma once
// Running totals over an allocation history: allocated and reserved bytes after every event, and
// live bytes by category. A block's category is the one it had when it was freed (or, if still
// alive, in the final snapshot): autograd re-tags a tensor Activation when it saves it, after the
// allocation event was recorded with the category of the moment.
//
// Reported categories are the seven of runtime/allocation_scope.h. A block nobody tagged
// (BlockCategory::Unknown) is a forward result that no backward node saved, freed as soon as its
// consumers ran: it is counted as temporary.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "memory/caching_allocator.h"
#include "memory/history.h"
#include "profile/event_log.h"

namespace sublet::profile {

enum class Category : std::uint8_t {
  Parameter, Gradient, Activation, OptimizerState, Workspace, Input, Temporary, Communication, Autocast
};
inline constexpr std::size_t kNumCategories = 9;
using CategoryBytes = std::array<std::int64_t, kNumCategories>;

Category report_category(memory::BlockCategory category);
const char* category_label(Category category);  // "parameter", "gradient", ... (as memory::category_name)
inline std::size_t index_of(Category c) { return static_cast<std::size_t>(c); }

struct Accounting {
  // Totals after event i (index as in the history); *_before: when recording began.
  std::vector<std::int64_t> allocated;
  std::vector<std::int64_t> reserved;
  std::vector<CategoryBytes> live_by_category;
  // For alloc and free_requested events: the block's final category. Other events: Temporary.
  std::vector<Category> category;
  std::int64_t allocated_before = 0;
  std::int64_t reserved_before = 0;
  CategoryBytes live_by_category_before{};

  std::int64_t allocated_at(std::uint64_t event) const { return event == 0 ? allocated_before : allocated[event - 1]; }
  std::int64_t reserved_at(std::uint64_t event) const { return event == 0 ? reserved_before : reserved[event - 1]; }
  const CategoryBytes& live_by_category_at(std::uint64_t event) const {
    return event == 0 ? live_by_category_before : live_by_category[event - 1];
  }
};

// `final_segments` is the allocator's snapshot when recording stopped (categories of survivors).
Accounting account(const std::vector<memory::HistoryEvent>& events, const Baseline& baseline,
                   const std::vector<memory::SegmentInfo>& final_segments);

// Reserved bytes change only through these events; device allocations are the first two.
bool is_device_alloc(memory::AllocatorEventKind kind);
std::int64_t reserved_change(const memory::HistoryEvent& event);

}  // namespace sublet::profile
