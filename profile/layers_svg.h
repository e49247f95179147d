#pragma once
// layers.svg: for every leaf module (and the phases outside the model) of one step, in forward
// order, the net change of allocated memory as bars stacked by category (growth to the right,
// release to the left of zero) and the peak above entry as a black tick; forward in the left
// panel, backward and optimizer in the right one.
#include <string>
#include <vector>

#include "profile/layer_rows.h"

namespace sublet::profile {

std::string layers_svg(const ProfileRun& run, const std::vector<LayerRow>& rows, int step);

}  // namespace sublet::profile
