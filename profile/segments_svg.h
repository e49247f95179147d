#pragma once
// segments.svg: the segment map at the step's peak (rebuilt by replaying the history, see
// history_replay.h): one row per segment, drawn full width whatever its size (its size is in the
// label), with its blocks in address order, allocated blocks coloured by category, free blocks
// grey and blocks waiting on other streams hatched. A split segment shows as several blocks.
#include <string>

#include "profile/history_replay.h"

namespace sublet::profile {

std::string segments_svg(const ProfileRun& run, const ReplayedState& state, const std::string& title);

}  // namespace sublet::profile
