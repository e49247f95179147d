#include "memory/static_plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>

#include "core/errors.h"

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
  // The placed allocations in (offset, end) order, so that the conflicting ones come out sorted
  // and greedy placement stops at the first gap that fits.
  std::vector<std::size_t> placed;
  placed.reserve(allocations.size());
  const auto by_offset = [&](std::size_t x, std::size_t y) {
    const PlannedAllocation& a = allocations[x];
    const PlannedAllocation& b = allocations[y];
    return a.offset != b.offset ? a.offset < b.offset : a.offset + a.size < b.offset + b.size;
  };
  std::size_t arena = 0;
  for (std::size_t index : order) {
    PlannedAllocation& a = allocations[index];
    std::size_t chosen = SIZE_MAX, chosen_gap = SIZE_MAX, cursor = 0;
    for (std::size_t other : placed) {
      const PlannedAllocation& o = allocations[other];
      if (!lifetimes_intersect(a, o)) continue;
      if (o.offset > cursor && o.offset - cursor >= a.size) {
        const std::size_t gap = o.offset - cursor;
        if (!best_fit) {
          chosen = cursor;
          break;
        }
        if (gap < chosen_gap) chosen = cursor, chosen_gap = gap;
      }
      cursor = std::max(cursor, o.offset + o.size);
    }
    a.offset = chosen != SIZE_MAX ? chosen : cursor;  // else above everything that conflicts
    arena = std::max(arena, a.offset + a.size);
    placed.insert(std::upper_bound(placed.begin(), placed.end(), index, by_offset), index);
  }
  return arena;
}

// The caching allocator's rule within one growing segment: in request order, the smallest free
// gap that holds the request (lowest offset on ties), else the top of the arena.
std::size_t place_online_best_fit(std::vector<PlannedAllocation>& allocations) {
  struct Event { std::size_t at; bool is_free; std::size_t index; };
  std::vector<Event> events;
  for (std::size_t i = 0; i < allocations.size(); ++i) {
    events.push_back({allocations[i].first, false, i});
    events.push_back({allocations[i].last, true, i});
  }
  // At one index a free comes before an alloc (lifetimes are half-open).
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.at != b.at ? a.at < b.at : (a.is_free != b.is_free ? a.is_free : a.index < b.index);
  });
  std::map<std::size_t, std::size_t> free_gaps;  // offset -> size, below the top
  std::size_t top = 0;
  for (const Event& e : events) {
    PlannedAllocation& a = allocations[e.index];
    if (e.is_free) {
      std::size_t offset = a.offset, size = a.size;
      auto next = free_gaps.lower_bound(offset);
      if (next != free_gaps.end() && next->first == offset + size) size += next->second, next = free_gaps.erase(next);
      if (next != free_gaps.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == offset) offset = prev->first, size += prev->second, free_gaps.erase(prev);
      }
      if (offset + size == top) top = offset;  // the top gap folds into the arena's free tail
      else free_gaps[offset] = size;
      continue;
    }
    auto chosen = free_gaps.end();
    for (auto it = free_gaps.begin(); it != free_gaps.end(); ++it)
      if (it->second >= a.size && (chosen == free_gaps.end() || it->second < chosen->second)) chosen = it;
    if (chosen == free_gaps.end()) {
      a.offset = top;
      top += a.size;
    } else {
      a.offset = chosen->first;
      if (chosen->second > a.size) free_gaps[chosen->first + a.size] = chosen->second - a.size;
      free_gaps.erase(chosen);
    }
  }
  std::size_t arena = 0;
  for (const PlannedAllocation& a : allocations) arena = std::max(arena, a.offset + a.size);
  return arena;
}

// TFLite's breadth order: allocations live at the moments of most live bytes first.
std::vector<std::size_t> breadth_order(const std::vector<PlannedAllocation>& allocations) {
  std::map<std::size_t, std::int64_t> change;
  for (const PlannedAllocation& a : allocations) {
    change[a.first] += static_cast<std::int64_t>(a.size);
    change[a.last] -= static_cast<std::int64_t>(a.size);
  }
  std::vector<std::pair<std::size_t, std::int64_t>> live_from;  // (index, live bytes from there on)
  std::int64_t live = 0;
  for (const auto& [index, delta] : change) live_from.emplace_back(index, live += delta);
  std::vector<std::int64_t> breadth(allocations.size(), 0);
  for (std::size_t i = 0; i < allocations.size(); ++i) {
    auto it = std::upper_bound(live_from.begin(), live_from.end(), allocations[i].first,
                               [](std::size_t v, const auto& p) { return v < p.first; });
    for (--it; it != live_from.end() && it->first < allocations[i].last; ++it) breadth[i] = std::max(breadth[i], it->second);
  }
  std::vector<std::size_t> order(allocations.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    if (breadth[x] != breadth[y]) return breadth[x] > breadth[y];
    const auto& a = allocations[x];
    const auto& b = allocations[y];
    return a.size != b.size ? a.size > b.size : a.first < b.first;
  });
  return order;
}

constexpr std::size_t kIteratedMaxAllocations = 4000;
constexpr int kFeedbackRounds = 64;

// Iterated greedy: place in `order`; the allocations that end above the lower bound go to the
// front of the order, and the placement is tried again; the smallest arena is kept.
std::size_t place_with_feedback(std::vector<PlannedAllocation>& allocations, std::vector<std::size_t> order,
                                std::size_t lower_bound, bool best_fit) {
  std::size_t smallest = SIZE_MAX;
  std::vector<PlannedAllocation> kept;
  std::vector<std::size_t> rank(order.size()), hits(order.size(), 0);
  for (std::size_t r = 0; r < order.size(); ++r) rank[order[r]] = r;
  for (int round = 0; round < kFeedbackRounds; ++round) {
    std::vector<PlannedAllocation> placed = allocations;
    const std::size_t arena = place(placed, order, best_fit);
    if (arena < smallest) smallest = arena, kept = placed;
    if (arena <= lower_bound) break;
    // Those above the bound gain priority, and keep it: an allocation that overflowed in any
    // round is placed before those that never did (most overflows first).
    for (std::size_t i = 0; i < placed.size(); ++i)
      if (placed[i].offset + placed[i].size > lower_bound) ++hits[i];
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return hits[a] != hits[b] ? hits[a] > hits[b] : rank[a] < rank[b];
    });
  }
  allocations = std::move(kept);
  return smallest;
}

}  // namespace

const std::vector<std::string>& static_plan_heuristics() {
  static const std::vector<std::string> names = {"greedy by size",     "best fit by size", "greedy by breadth",
                                                 "greedy by lifetime", "online best fit",  "iterated greedy by size",
                                                 "iterated best fit by size", "iterated greedy by breadth",
                                                 "iterated greedy by lifetime"};
  return names;
}

StaticPlan plan_static_arena(const std::vector<TraceEvent>& events, const std::string& heuristic) {
  const auto& names = static_plan_heuristics();
  if (!heuristic.empty() && std::find(names.begin(), names.end(), heuristic) == names.end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    throw ValueError("static plan: unknown heuristic '" + heuristic + "'; known: " + known);
  }
  StaticPlan best;
  const std::vector<PlannedAllocation> allocations = lifetimes(events);
  best.lower_bound = live_bytes_peak(allocations);
  best.arena_bytes = SIZE_MAX;
  if (allocations.empty()) {
    best.arena_bytes = 0;
    best.heuristic = "none (no allocations)";
    return best;
  }
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
  auto consider = [&](const std::string& name, const std::function<std::size_t(std::vector<PlannedAllocation>&)>& run) {
    if (!heuristic.empty() && heuristic != name) return;
    std::vector<PlannedAllocation> trial = allocations;
    const std::size_t arena = run(trial);
    best.tried.emplace_back(name, arena);
    if (arena < best.arena_bytes) {
      best.arena_bytes = arena;
      best.allocations = std::move(trial);
      best.heuristic = name;
    }
  };
  consider("greedy by size", [&](auto& t) { return place(t, by_size, false); });
  consider("best fit by size", [&](auto& t) { return place(t, by_size, true); });
  consider("greedy by breadth", [&](auto& t) { return place(t, breadth_order(allocations), false); });
  consider("greedy by lifetime", [&](auto& t) { return place(t, by_lifetime, false); });
  consider("online best fit", [&](auto& t) { return place_online_best_fit(t); });
  if (allocations.size() <= kIteratedMaxAllocations) {
    consider("iterated greedy by size", [&](auto& t) { return place_with_feedback(t, by_size, best.lower_bound, false); });
    consider("iterated best fit by size", [&](auto& t) { return place_with_feedback(t, by_size, best.lower_bound, true); });
    consider("iterated greedy by breadth", [&](auto& t) { return place_with_feedback(t, breadth_order(allocations), best.lower_bound, false); });
    consider("iterated greedy by lifetime", [&](auto& t) { return place_with_feedback(t, by_lifetime, best.lower_bound, false); });
  }
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
