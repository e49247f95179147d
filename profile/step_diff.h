#pragma once
// What survives a step that should not: the blocks alive after step `later` that have no
// counterpart alive after step `earlier`, and the reverse. Blocks are matched by (annotation,
// category, size), not by address: in a steady training loop every step leaves the same set of
// blocks behind (parameters, their gradients, optimizer state), so anything left over is growth:
// a graph kept alive, a loss history on the device, a cache that keeps growing.
#include <cstdint>
#include <string>
#include <vector>

#include "memory/caching_allocator.h"
#include "profile/category_accounting.h"

namespace sublet::profile {

struct DiffGroup {
  std::string annotation;
  Category category = Category::Temporary;
  std::int64_t count = 0;
  std::int64_t bytes = 0;
};

struct StepDiff {
  int earlier = 0, later = 0;
  std::vector<DiffGroup> added;    // alive after `later`, not after `earlier`; largest first
  std::vector<DiffGroup> removed;  // alive after `earlier`, not after `later`
  std::int64_t added_bytes = 0, removed_bytes = 0;
};

StepDiff diff_steps(int earlier, const std::vector<memory::SegmentInfo>& after_earlier, int later,
                    const std::vector<memory::SegmentInfo>& after_later);
std::string format_step_diff(const StepDiff& diff);

}  // namespace sublet::profile
