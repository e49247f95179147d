#pragma once
// How a CUDA-graph training step lays out its memory (runtime/step/graphed_train_step.h), and what the
// static plan achieved. In its own header, free of CUDA, so that options and reports name it in
// every build.
#include <cstddef>
#include <string>
#include <vector>

#include "core/errors.h"
#include "memory/trace_event.h"

namespace sublet {

// Cached: the graph's private pool follows the caching allocator's rules during capture.
// Static: the captured step is served from one arena laid out offline (analysis/static_plan.h).
enum class MemoryPlan { Cached, Static };

inline const char* memory_plan_name(MemoryPlan plan) { return plan == MemoryPlan::Static ? "static" : "cached"; }

inline MemoryPlan parse_memory_plan(const std::string& text) {
  if (text == "cached") return MemoryPlan::Cached;
  if (text == "static") return MemoryPlan::Static;
  throw ValueError("memory plan: expected cached or static, got '" + text + "'");
}

struct MemoryPlanReport {
  MemoryPlan plan = MemoryPlan::Cached;
  std::size_t lower_bound_bytes = 0;   // Static: most bytes live at once in the recorded step
  std::size_t arena_bytes = 0;         // Static: the planned arena
  std::string heuristic;               // Static: the planner heuristic that gave it
  std::size_t requests = 0;            // Static: requests recorded, and served from the plan
  std::size_t served = 0;
  std::string abandoned;               // Static: why the capture left the plan, if it did
  std::vector<memory::TraceEvent> recorded;  // Static: the probe capture's requests (for `sublet plan`)
  std::size_t reserved_before_capture = 0;  // what the warm-up steps left reserved
  std::size_t reserved_at_capture = 0;      // after the empty_cache() before the capture
  std::size_t probe_reserved_left = 0;  // Static: the probe pool's bytes still reserved when the arena was taken
  std::string probe_held;               // Static: what held them (category and bytes)
};

}  // namespace sublet
