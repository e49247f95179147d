#pragma once
// memory.svg: allocated memory (stacked by category) and reserved memory over one step, against
// the step's allocator events in order (every allocation and free gets the same width, so fast
// layers that allocate a lot are not squeezed), with bands for the model's top-level layers and
// the phases outside it, and the step's peak marked with the span that holds it.
#include <string>
#include <vector>

#include "profile/layer_rows.h"

namespace sublet::profile {

std::string memory_timeline_svg(const ProfileRun& run, const std::vector<LayerRow>& rows, int step);

}  // namespace sublet::profile
