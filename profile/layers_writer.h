#pragma once
// The layer table as layers.csv, layers.json and a table for the terminal.
#include <string>
#include <vector>

#include "profile/layer_rows.h"
#include "profile/profile_session.h"

namespace sublet::profile {

// Bytes as integers, one row per line; the header names every column.
void write_layers_csv(const std::string& path, const std::vector<LayerRow>& rows);
// {"model", "device", "allocator_config", "categories": [...], "steps": [{step, peak_allocated,
//  peak_reserved, ...}], "rows": [{...the CSV's columns..., "allocated_by_category": {...},
//  "net_by_category": {...}}]}
void write_layers_json(const std::string& path, const ProfileRun& run, const std::vector<LayerRow>& rows);
// The rows of one step, indented by depth, human-readable sizes; '*' marks the spans holding the
// step's peak.
std::string layers_table(const std::vector<LayerRow>& rows, int step);

}  // namespace sublet::profile
