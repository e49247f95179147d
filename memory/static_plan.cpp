#include "memory/static_plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>

#include "memory/caching_allocator.h"

namespace sublet::memory {
namespace {

std::size_t round_512(std::size_t bytes) { return (std::max<std::size_t>(bytes, 1) + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize; }

bool lifetimes_intersect(const PlannedAllocation& a, const PlannedAllocation& b) {
  return a.first < b.last && b.first < a.last;
}

// The allocations of the trace with their lifetimes [first, last).
std::vector<PlannedAllocation> lifetimes(const std::vector<TraceEvent>& events) {
  std::vector<PlannedAllocation> out;
  std::unordered_map<std::uint64_t, std::size_t> live;  // id -> index in out
  for (std::size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    if (e.action == TraceEvent::Action::Alloc) {
      live[e.id] = out.size();
      out.push_back({.id = e.id, .size = round_512(e.size), .first = i, .last = events.size()});
    } else if (e.action == TraceEvent::Action::Free) {
      if (auto it = live.find(e.id); it != live.end()) {
        out[it->second].last = i;
        live.erase(it);
      }
    }
  }
  return out;
}

std::size_t live_bytes_peak(const std::vector<PlannedAllocation>& allocations) {
  std::map<std::size_t, std::int64_t> change;  // event index -> bytes that start (+) or end (-)
  for (const PlannedAllocation& a : allocations) {
    change[a.first] += static_cast<std::int64_t>(a.size);
    change[a.last] -= static_cast<std::int64_t>(a.size);
  }
  std::int64_t live = 0, peak = 0;
  for (const auto& [index, delta] : change) {
    live += delta;
    peak = std::max(peak, live);
  }
  return static_cast<std::size_t>(peak);
}

// Places allocations in `order`; `best_fit` picks the smallest gap that holds one instead of the
// lowest. Returns the arena size.
std::size_t place(std::vector<PlannedAllocation>& allocations, const std::vector<std::size_t>& order, bool best_fit) {
  std::vector<std::size_t> placed;
  std::size_t arena = 0;
  for (std::size_t index : order) {
    PlannedAllocation& a = allocations[index];
    std::vector<std::pair<std::size_t, std::size_t>> taken;  // [offset, end) of conflicting placed ones
    for (std::size_t other : placed)
      if (lifetimes_intersect(a, allocations[other]))
        taken.push_back({allocations[other].offset, allocations[other].offset + allocations[other].size});
    std::sort(taken.begin(), taken.end());
    std::size_t chosen = SIZE_MAX, chosen_gap = SIZE_MAX, cursor = 0;
    for (const auto& [begin, end] : taken) {
      if (begin > cursor && begin - cursor >= a.size) {
        const std::size_t gap = begin - cursor;
        if (!best_fit) {
          chosen = cursor;
          break;
        }
        if (gap < chosen_gap) chosen = cursor, chosen_gap = gap;
      }
      cursor = std::max(cursor, end);
    }
    a.offset = chosen != SIZE_MAX ? chosen : cursor;  // else above everything that conflicts
    arena = std::max(arena, a.offset + a.size);
    placed.push_back(index);
  }
  return arena;
}

}  // namespace

StaticPlan plan_static_arena(const std::vector<TraceEvent>& events) {
  StaticPlan best;
  const std::vector<PlannedAllocation> allocations = lifetimes(events);
  best.lower_bound = live_bytes_peak(allocations);
  std::vector<std::size_t> by_size(allocations.size());
  for (std::size_t i = 0; i < by_size.size(); ++i) by_size[i] = i;
  std::vector<std::size_t> by_lifetime = by_size;
  // Ties broken by first use, so that plans do not depend on the sort's stability.
  std::sort(by_size.begin(), by_size.end(), [&](std::size_t x, std::size_t y) {
    const auto& a = allocations[x];
    const auto& b = allocations[y];
    return a.size != b.size ? a.size > b.size : a.first < b.first;
  });
  std::sort(by_lifetime.begin(), by_lifetime.end(), [&](std::size_t x, std::size_t y) {
    const auto& a = allocations[x];
    const auto& b = allocations[y];
    const std::size_t la = a.last - a.first, lb = b.last - b.first;
    return la != lb ? la > lb : (a.size != b.size ? a.size > b.size : a.first < b.first);
  });
  const struct {
    const char* name;
    const std::vector<std::size_t>* order;
    bool best_fit;
  } heuristics[] = {{"greedy by size", &by_size, false},
                    {"best fit by size", &by_size, true},
                    {"greedy by lifetime", &by_lifetime, false}};
  best.arena_bytes = SIZE_MAX;
  for (const auto& h : heuristics) {
    std::vector<PlannedAllocation> trial = allocations;
    const std::size_t arena = place(trial, *h.order, h.best_fit);
    if (arena < best.arena_bytes) {
      best.arena_bytes = arena;
      best.allocations = std::move(trial);
      best.heuristic = h.name;
    }
  }
  if (allocations.empty()) best.arena_bytes = 0, best.heuristic = "none (no allocations)";
  return best;
}

bool plan_is_valid(const StaticPlan& plan, std::string* why) {
  std::vector<const PlannedAllocation*> by_offset;
  for (const PlannedAllocation& a : plan.allocations) by_offset.push_back(&a);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (std::size_t i = 0; i < by_offset.size(); ++i) {
    const PlannedAllocation& a = *by_offset[i];
    if (a.offset + a.size > plan.arena_bytes) {
      if (why) *why = "allocation " + std::to_string(a.id) + " ends past the arena";
      return false;
    }
    for (std::size_t j = i + 1; j < by_offset.size() && by_offset[j]->offset < a.offset + a.size; ++j) {
      if (lifetimes_intersect(a, *by_offset[j])) {
        if (why) *why = "allocations " + std::to_string(a.id) + " and " + std::to_string(by_offset[j]->id) + " overlap while both live";
        return false;
      }
    }
  }
  return true;
}

}  // namespace sublet::memory
