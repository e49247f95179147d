#pragma once
// trace.json in Chrome's trace-event format (Perfetto, chrome://tracing):
//  - every span as a complete event (ph "X", ts and dur in microseconds), on tracks chosen so that
//    slices on one track nest (backward spans of residual blocks need not);
//  - each step as a complete event on its own track;
//  - counters (ph "C"): "memory (MiB)" with allocated and reserved, and "allocated by category
//    (MiB)" with one series per category, after every allocator event;
//  - instant events (ph "i") for segment allocations, frees, maps, unmaps and out-of-memory errors.
#include <string>

#include "profile/layer_rows.h"
#include "profile/profile_session.h"

namespace sublet::profile {

void write_chrome_trace(const std::string& path, const ProfileRun& run, const std::vector<LayerRow>& rows);

}  // namespace sublet::profile
