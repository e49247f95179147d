#pragma once
// The flags that give each step its own shape (`train`, `bench step`, `profile`), and the rules
// they share: one source of shapes, and no fixed shape flag beside it. The schedule itself is
// runtime/data/shape_schedule.h.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "runtime/data/shape_schedule.h"

namespace sublet::cli {

struct ShapeScheduleFlags {
  std::string seq_len_range;  // "MIN:MAX", with tokens_per_batch
  std::int64_t tokens_per_batch = 0;
  std::string resolutions;    // "224,192,160"
  std::string read_path;      // --shape-schedule
  std::string write_path;     // --write-shape-schedule (commands that offer it)
  bool images_offered = true;  // --resolutions is a flag of the command (set by add_shape_schedule_flags)
  // A schedule is drawn from the seed (rather than read or absent).
  bool draws() const { return !seq_len_range.empty() || tokens_per_batch > 0 || !resolutions.empty(); }
  bool given() const { return draws() || !read_path.empty(); }
};

// What a command offers: the image flag (--resolutions) or only the token ones, and the file it
// may write; `read_help` says which of the file's entries the command uses.
struct ShapeScheduleFlagSet {
  std::string read_help;
  bool images = true;
  bool write = false;
};

// --seq-len-range, --tokens-per-batch, --shape-schedule, and as `set` says --resolutions and
// --write-shape-schedule.
void add_shape_schedule_flags(CLI::App& command, ShapeScheduleFlags& flags, const ShapeScheduleFlagSet& set);

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
// `command` ("train", "bench step", "profile"), for two sources, a half-given token schedule, a
// fixed shape flag beside a schedule, or --write-shape-schedule without a drawn schedule.
std::optional<data::ShapeSchedule> shape_schedule_from_flags(const std::string& command, const ShapeScheduleFlags& flags,
                                                             const FixedShapeFlags& given, const ScheduleDraw& draw);

// --write-shape-schedule: writes `schedule` and says so on `out`; nothing when the flag is absent.
void write_shape_schedule_if_asked(const ShapeScheduleFlags& flags, const data::ShapeSchedule& schedule,
                                   std::ostream& out);

}  // namespace sublet::cli
