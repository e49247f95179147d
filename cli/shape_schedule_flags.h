#pragma once
// The flags that give each step its own shape (`bench step`, `profile`), and the rules both share:
// one source of shapes, and no fixed shape flag beside it. The schedule itself is
// bench/step/shape_schedule.h.
#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "bench/step/shape_schedule.h"

namespace sublet::cli {

struct ShapeScheduleFlags {
  std::string seq_len_range;  // "MIN:MAX", with tokens_per_batch
  std::int64_t tokens_per_batch = 0;
  std::string resolutions;    // "224,192,160"
  std::string read_path;      // --shape-schedule
  // A schedule is drawn from the seed (rather than read or absent).
  bool draws() const { return !seq_len_range.empty() || tokens_per_batch > 0 || !resolutions.empty(); }
};

// --seq-len-range, --tokens-per-batch, --resolutions and --shape-schedule (`read_help` says which
// of the file's entries the command uses).
void add_shape_schedule_flags(CLI::App& command, ShapeScheduleFlags& flags, const std::string& read_help);

// Which fixed shape flags were given on the command line (refused beside a schedule).
struct FixedShapeFlags {
  bool batch_size = false, seq_len = false, input = false;
};

// How a drawn schedule is drawn: `steps` entries from `seed`; images keep `batch_size` and
// `channels`.
struct ScheduleDraw {
  std::uint64_t seed = 0;
  std::int64_t steps = 0;
  std::int64_t batch_size = 0;
  std::int64_t channels = 0;
};

// The schedule the flags ask for, or nothing when none is given. ValueError, prefixed with
// `command` ("bench step", "profile"), for two sources, a half-given token schedule, or a fixed
// shape flag beside a schedule.
std::optional<bench::ShapeSchedule> shape_schedule_from_flags(const std::string& command, const ShapeScheduleFlags& flags,
                                                              const FixedShapeFlags& given, const ScheduleDraw& draw);

}  // namespace sublet::cli
