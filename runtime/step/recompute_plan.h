#pragma once
// The recomputation planner (analysis/recompute_plan.h: which runs of blocks to checkpoint under a
// memory budget, arithmetic over measured bytes) as the floors above runtime/ use it: models/
// measures a network and applies the choice without including memory/.
#include "analysis/recompute_plan.h"

namespace sublet {

using memory::choose_recompute;
using memory::MemoryBudget;
using memory::RecomputeChoice;
using memory::RecomputeRun;
using memory::RecomputeUnit;
using memory::resolve_budget;

}  // namespace sublet
