#include "cli/shape_schedule_flags.h"

#include "core/errors.h"

namespace sublet::cli {

void add_shape_schedule_flags(CLI::App& command, ShapeScheduleFlags& flags, const ShapeScheduleFlagSet& set) {
  command.add_option("--seq-len-range", flags.seq_len_range,
                     "GPT models: a new window length each step, drawn uniformly from MIN:MAX (seeded by --seed) and "
                     "rounded up to a multiple of 8, so MAX must be one; with --tokens-per-batch");
  command.add_option("--tokens-per-batch", flags.tokens_per_batch,
                     "with --seq-len-range: each step's batch is max(1, N / length), about N tokens a step")
      ->check(CLI::Range(1, 1 << 24));
  if (set.images)
    command.add_option("--resolutions", flags.resolutions,
                       "image models: a new resolution each step, drawn uniformly from this list of sides (224,192,160: "
                       "Cx224x224, ...; C from --input, the batch from --batch-size; seeded by --seed)");
  command.add_option("--shape-schedule", flags.read_path,
                     "read every step's shape from this file (sublet-shape-schedule JSON, as --write-shape-schedule "
                     "writes it; bench/pytorch_step.py reads it too); " + set.read_help)
      ->check(CLI::ExistingFile);
  if (set.write)
    command.add_option("--write-shape-schedule", flags.write_path,
                       set.images ? "write the schedule drawn from --seq-len-range or --resolutions to this file before "
                                    "the run"
                                  : "write the schedule drawn from --seq-len-range to this file before the run");
  flags.images_offered = set.images;
}

std::optional<data::ShapeSchedule> shape_schedule_from_flags(const std::string& command, const ShapeScheduleFlags& flags,
                                                             const FixedShapeFlags& given, const ScheduleDraw& draw) {
  const bool drawn_tokens = !flags.seq_len_range.empty() || flags.tokens_per_batch > 0;
  const bool drawn_images = !flags.resolutions.empty();
  const bool read = !flags.read_path.empty();
  if (!flags.write_path.empty() && !flags.draws())
    throw ValueError(command + " --write-shape-schedule: writes the schedule drawn from --seq-len-range and "
                     "--tokens-per-batch" + std::string(flags.images_offered ? ", or from --resolutions" : "") +
                     "; give one of them");
  if (int(drawn_tokens) + int(drawn_images) + int(read) > 1)
    throw ValueError(command + ": --seq-len-range/--tokens-per-batch, --resolutions and --shape-schedule each give the "
                     "shapes; use one of them");
  if (!drawn_tokens && !drawn_images && !read) return std::nullopt;
  if (given.seq_len && (drawn_tokens || read))
    throw ValueError(command + " --seq-len: the shape schedule sets every step's length; drop --seq-len");
  if (read) {
    if (given.batch_size || given.input)
      throw ValueError(command + " --shape-schedule: the file sets every step's batch and shape; drop --batch-size" +
                       std::string(flags.images_offered ? " and --input" : ""));
    return data::load_shape_schedule(flags.read_path);
  }
  if (drawn_tokens) {
    if (flags.seq_len_range.empty() || flags.tokens_per_batch <= 0)
      throw ValueError(command + ": --seq-len-range and --tokens-per-batch go together (a length each step, and the "
                       "tokens a batch keeps about)");
    if (given.batch_size)
      throw ValueError(command + " --batch-size: with --tokens-per-batch each step's batch is tokens / length; drop "
                       "--batch-size");
    const auto [lo, hi] = data::parse_seq_len_range(flags.seq_len_range);
    return data::token_schedule(
        {.seed = draw.seed, .steps = draw.steps, .min_len = lo, .max_len = hi, .tokens_per_batch = flags.tokens_per_batch});
  }
  return data::image_schedule({.seed = draw.seed, .steps = draw.steps, .batch_size = draw.batch_size,
                               .channels = draw.channels, .resolutions = data::parse_resolutions(flags.resolutions)});
}

void write_shape_schedule_if_asked(const ShapeScheduleFlags& flags, const data::ShapeSchedule& schedule,
                                   std::ostream& out) {
  if (flags.write_path.empty()) return;
  data::save_shape_schedule(flags.write_path, schedule);
  out << "wrote " << flags.write_path << "\n";
}

}  // namespace sublet::cli
