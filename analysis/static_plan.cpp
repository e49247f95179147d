#include "analysis/static_plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "core/errors.h"

#include "memory/caching_allocator.h"

namespace sublet::memory {
namespace {

// Sizes and offsets come from a file: a sum past 2^64 is an error naming the allocation, never
// a wrapped figure.
[[noreturn]] void too_large(std::size_t event, std::uint64_t id, std::size_t size, const char* what) {
  throw ValueError(fmt::format("static plan: event {} (alloc of id {}, {} bytes): {} passes 2^64 bytes", event, id, size, what));
}

std::size_t checked_add(std::size_t a, std::size_t b, const PlannedAllocation& at, const char* what) {
  std::size_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) too_large(at.first, at.id, at.size, what);
  return sum;
}

std::size_t round_512(std::size_t bytes, std::size_t event, std::uint64_t id) {
  if (bytes > SIZE_MAX - kMinBlockSize) too_large(event, id, bytes, "the size rounded up to 512 bytes");
  return (std::max<std::size_t>(bytes, 1) + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

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
      out.push_back({.id = e.id, .size = round_512(e.size, i, e.id), .first = i, .last = events.size()});
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
  // Event index -> bytes that start (+) and end (-) there, in 128 bits so that no sum wraps.
  std::map<std::size_t, __int128> change;
  for (const PlannedAllocation& a : allocations) {
    change[a.first] += static_cast<__int128>(a.size);
    change[a.last] -= static_cast<__int128>(a.size);
  }
  __int128 live = 0, peak = 0;
  for (const auto& [index, delta] : change) {
    live += delta;
    if (live > static_cast<__int128>(SIZE_MAX))
      throw ValueError(fmt::format("static plan: at event {} the bytes live at once pass 2^64 bytes", index));
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
    arena = std::max(arena, checked_add(a.offset, a.size, a, "the arena"));
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
  std::map<std::size_t, std::size_t> free_gaps;          // offset -> size, below the top
  std::set<std::pair<std::size_t, std::size_t>> by_size;  // (size, offset) of the same gaps: best fit in O(log n)
  const auto add_gap = [&](std::size_t offset, std::size_t size) {
    free_gaps[offset] = size;
    by_size.emplace(size, offset);
  };
  const auto erase_gap = [&](std::map<std::size_t, std::size_t>::iterator it) {
    by_size.erase({it->second, it->first});
    return free_gaps.erase(it);
  };
  std::size_t top = 0;
  for (const Event& e : events) {
    PlannedAllocation& a = allocations[e.index];
    if (e.is_free) {
      std::size_t offset = a.offset, size = a.size;
      auto next = free_gaps.lower_bound(offset);
      if (next != free_gaps.end() && next->first == offset + size) size += next->second, next = erase_gap(next);
      if (next != free_gaps.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == offset) offset = prev->first, size += prev->second, erase_gap(prev);
      }
      if (offset + size == top) top = offset;  // the top gap folds into the arena's free tail
      else add_gap(offset, size);
      continue;
    }
    // The smallest gap that holds it, the lowest offset among gaps of that size.
    const auto fit = by_size.lower_bound({a.size, 0});
    if (fit == by_size.end()) {
      a.offset = top;
      top = checked_add(top, a.size, a, "the arena");
    } else {
      const auto [gap_size, gap_offset] = *fit;
      a.offset = gap_offset;
      erase_gap(free_gaps.find(gap_offset));
      if (gap_size > a.size) add_gap(gap_offset + a.size, gap_size - a.size);
    }
  }
  std::size_t arena = 0;
  for (const PlannedAllocation& a : allocations) arena = std::max(arena, a.offset + a.size);
  return arena;
}

// TFLite's breadth order: allocations live at the moments of most live bytes first.
std::vector<std::size_t> breadth_order(const std::vector<PlannedAllocation>& allocations) {
  std::map<std::size_t, __int128> change;
  for (const PlannedAllocation& a : allocations) {
    change[a.first] += static_cast<__int128>(a.size);
    change[a.last] -= static_cast<__int128>(a.size);
  }
  std::vector<std::pair<std::size_t, __int128>> live_from;  // (index, live bytes from there on)
  __int128 live = 0;
  for (const auto& [index, delta] : change) live_from.emplace_back(index, live += delta);
  std::vector<__int128> breadth(allocations.size(), 0);
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
// The offline heuristics compare each allocation with every placed one whose lifetime meets its
// own; beyond this many allocations only the online best fit, O(n log n), is tried.
constexpr std::size_t kOfflineMaxAllocations = 20000;
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
  const bool offline = !heuristic.empty() || allocations.size() <= kOfflineMaxAllocations;
  if (offline) {
    consider("greedy by size", [&](auto& t) { return place(t, by_size, false); });
    consider("best fit by size", [&](auto& t) { return place(t, by_size, true); });
    consider("greedy by breadth", [&](auto& t) { return place(t, breadth_order(allocations), false); });
    consider("greedy by lifetime", [&](auto& t) { return place(t, by_lifetime, false); });
  }
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
