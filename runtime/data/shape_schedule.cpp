#include "runtime/data/shape_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <set>

#include "core/atomic_write.h"
#include "core/errors.h"
#include "core/input_file.h"

namespace sublet::data {
namespace {

constexpr const char* kFormat = "sublet-shape-schedule";
constexpr std::int64_t kMaxDimension = std::int64_t{1} << 24;  // any length, batch or side past this is a typo
constexpr std::size_t kMaxScheduleBytes = std::size_t{64} << 20;

// Uniform in [lo, hi] from the raw 64-bit output (whose sequence the standard fixes), by
// rejection: std::uniform_int_distribution differs between standard libraries, and a schedule
// drawn again from its seed must not.
std::int64_t draw(std::mt19937_64& engine, std::int64_t lo, std::int64_t hi) {
  const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % span;
  std::uint64_t x = engine();
  while (x >= limit) x = engine();
  return lo + static_cast<std::int64_t>(x % span);
}

std::int64_t parse_positive(const std::string& flag, const std::string& text, const std::string& part,
                            const std::string& expected) {
  if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != std::string::npos || std::stoll(part) <= 0)
    throw ValueError(flag + " '" + text + "': expected " + expected);
  return std::stoll(part);
}

void check_positive(const std::string& what, std::int64_t value) {
  if (value <= 0 || value > kMaxDimension)
    throw ValueError(fmt::format("shape schedule: {} must be in [1, {}], got {}", what, kMaxDimension, value));
}

}  // namespace

std::int64_t ShapeSchedule::longest() const {
  std::int64_t most = 0;
  for (const ShapeStep& s : steps) most = std::max(most, s.seq_len);
  return most;
}

std::int64_t ShapeSchedule::most_tokens() const {
  std::int64_t most = 0;
  for (const ShapeStep& s : steps) most = std::max(most, s.batch * s.seq_len);
  return most;
}

std::string ShapeSchedule::describe() const {
  if (tokens())
    return fmt::format("seq {}..{} (multiples of {}), about {} tokens per step", min_len, max_len, multiple,
                       tokens_per_batch);
  std::string list;
  for (std::int64_t r : resolutions) list += (list.empty() ? "" : ",") + std::to_string(r);
  return fmt::format("{}x{{{}}}", channels, list);
}

ShapeSchedule token_schedule(const TokenScheduleSpec& spec) {
  check_positive("the step count", spec.steps);
  check_positive("the shortest length", spec.min_len);
  check_positive("the longest length", spec.max_len);
  check_positive("tokens per batch", spec.tokens_per_batch);
  check_positive("the length multiple", spec.multiple);
  if (spec.min_len > spec.max_len)
    throw ValueError(fmt::format("--seq-len-range {}:{}: the shortest length is above the longest", spec.min_len, spec.max_len));
  if (spec.max_len % spec.multiple != 0)
    throw ValueError(fmt::format("--seq-len-range {}:{}: lengths round up to a multiple of {}, so the longest must be one "
                                 "(e.g. {})",
                                 spec.min_len, spec.max_len, spec.multiple, spec.max_len / spec.multiple * spec.multiple));
  ShapeSchedule s;
  s.kind = ShapeSchedule::Kind::Tokens;
  s.seed = spec.seed;
  s.min_len = spec.min_len;
  s.max_len = spec.max_len;
  s.multiple = spec.multiple;
  s.tokens_per_batch = spec.tokens_per_batch;
  std::mt19937_64 engine(spec.seed);
  for (std::int64_t i = 0; i < spec.steps; ++i) {
    const std::int64_t drawn = draw(engine, spec.min_len, spec.max_len);
    const std::int64_t len = (drawn + spec.multiple - 1) / spec.multiple * spec.multiple;
    s.steps.push_back({.batch = std::max<std::int64_t>(1, spec.tokens_per_batch / len), .seq_len = len});
  }
  return s;
}

ShapeSchedule image_schedule(const ImageScheduleSpec& spec) {
  check_positive("the step count", spec.steps);
  check_positive("the batch size", spec.batch_size);
  check_positive("the channel count", spec.channels);
  if (spec.resolutions.empty()) throw ValueError("--resolutions: expected at least one resolution");
  for (std::int64_t r : spec.resolutions) check_positive("a resolution", r);
  ShapeSchedule s;
  s.kind = ShapeSchedule::Kind::Images;
  s.seed = spec.seed;
  s.batch_size = spec.batch_size;
  s.channels = spec.channels;
  s.resolutions = spec.resolutions;
  std::mt19937_64 engine(spec.seed);
  const auto last = static_cast<std::int64_t>(spec.resolutions.size()) - 1;
  for (std::int64_t i = 0; i < spec.steps; ++i) {
    const std::int64_t r = spec.resolutions[static_cast<std::size_t>(draw(engine, 0, last))];
    s.steps.push_back({.batch = spec.batch_size, .channels = spec.channels, .height = r, .width = r});
  }
  return s;
}

std::pair<std::int64_t, std::int64_t> parse_seq_len_range(const std::string& text) {
  const std::string expected = "MIN:MAX with positive integers, MIN <= MAX, e.g. 64:1024";
  const auto colon = text.find(':');
  if (colon == std::string::npos) throw ValueError("--seq-len-range '" + text + "': expected " + expected);
  const std::int64_t lo = parse_positive("--seq-len-range", text, text.substr(0, colon), expected);
  const std::int64_t hi = parse_positive("--seq-len-range", text, text.substr(colon + 1), expected);
  if (lo > hi) throw ValueError("--seq-len-range '" + text + "': expected " + expected);
  return {lo, hi};
}

std::vector<std::int64_t> parse_resolutions(const std::string& text) {
  const std::string expected = "a comma-separated list of positive sides, e.g. 224,192,160";
  std::vector<std::int64_t> out;
  std::size_t begin = 0;
  for (;;) {
    const auto comma = text.find(',', begin);
    out.push_back(parse_positive("--resolutions", text, text.substr(begin, comma - begin), expected));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return out;
}

nlohmann::json shape_schedule_json(const ShapeSchedule& s) {
  nlohmann::json steps = nlohmann::json::array();
  for (const ShapeStep& step : s.steps) {
    if (s.tokens()) steps.push_back({{"batch", step.batch}, {"seq_len", step.seq_len}});
    else steps.push_back({{"batch", step.batch}, {"input", {step.channels, step.height, step.width}}});
  }
  nlohmann::json j = {{"format", kFormat}, {"version", kShapeScheduleVersion},
                      {"kind", s.tokens() ? "tokens" : "images"}, {"seed", s.seed}};
  if (s.tokens()) {
    j["seq_len_min"] = s.min_len;
    j["seq_len_max"] = s.max_len;
    j["multiple"] = s.multiple;
    j["tokens_per_batch"] = s.tokens_per_batch;
  } else {
    j["batch_size"] = s.batch_size;
    j["channels"] = s.channels;
    j["resolutions"] = s.resolutions;
  }
  j["steps"] = steps;
  return j;
}

namespace {

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& what) const { throw ValueError(source_ + ": " + what); }

  const nlohmann::json& field(const nlohmann::json& object, const std::string& key, const std::string& where) const {
    if (!object.is_object()) fail(where + ": expected a JSON object, found " + std::string(object.type_name()));
    const auto it = object.find(key);
    if (it == object.end()) fail(where + ": the key \"" + key + "\" is missing");
    return *it;
  }

  std::int64_t positive(const nlohmann::json& object, const std::string& key, const std::string& where) const {
    const nlohmann::json& v = field(object, key, where);
    if (!v.is_number_integer()) fail(where + ": \"" + key + "\" must be an integer, found " + v.dump());
    const auto value = v.get<std::int64_t>();
    if (value <= 0 || value > kMaxDimension)
      fail(fmt::format("{}: \"{}\" must be in [1, {}], found {}", where, key, kMaxDimension, v.dump()));
    return value;
  }

 private:
  std::string source_;
};

}  // namespace

ShapeSchedule shape_schedule_from_json(const nlohmann::json& j, const std::string& source) {
  const Reader r(source);
  const nlohmann::json& format = r.field(j, "format", "the schedule");
  if (format != kFormat) r.fail("\"format\" must be \"" + std::string(kFormat) + "\", found " + format.dump());
  const nlohmann::json& version = r.field(j, "version", "the schedule");
  if (version != kShapeScheduleVersion)
    r.fail(fmt::format("unknown \"version\" {} (this sublet reads version {})", version.dump(), kShapeScheduleVersion));
  const nlohmann::json& kind = r.field(j, "kind", "the schedule");
  if (kind != "tokens" && kind != "images") r.fail("\"kind\" must be \"tokens\" or \"images\", found " + kind.dump());
  ShapeSchedule s;
  s.kind = kind == "tokens" ? ShapeSchedule::Kind::Tokens : ShapeSchedule::Kind::Images;
  const nlohmann::json& seed = r.field(j, "seed", "the schedule");
  if (!seed.is_number_unsigned()) r.fail("\"seed\" must be a non-negative integer, found " + seed.dump());
  s.seed = seed.get<std::uint64_t>();
  if (s.tokens()) {
    s.min_len = r.positive(j, "seq_len_min", "the schedule");
    s.max_len = r.positive(j, "seq_len_max", "the schedule");
    s.multiple = r.positive(j, "multiple", "the schedule");
    s.tokens_per_batch = r.positive(j, "tokens_per_batch", "the schedule");
  } else {
    s.batch_size = r.positive(j, "batch_size", "the schedule");
    s.channels = r.positive(j, "channels", "the schedule");
    const nlohmann::json& list = r.field(j, "resolutions", "the schedule");
    if (!list.is_array() || list.empty()) r.fail("\"resolutions\" must be a non-empty list, found " + list.dump());
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_number_integer() || list[i].get<std::int64_t>() <= 0 || list[i].get<std::int64_t>() > kMaxDimension)
        r.fail(fmt::format("\"resolutions\"[{}] must be a positive integer, found {}", i, list[i].dump()));
      s.resolutions.push_back(list[i].get<std::int64_t>());
    }
  }
  const nlohmann::json& steps = r.field(j, "steps", "the schedule");
  if (!steps.is_array() || steps.empty()) r.fail("\"steps\" must be a non-empty list, found " + std::string(steps.type_name()));
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string where = fmt::format("step {}", i);
    ShapeStep step;
    step.batch = r.positive(steps[i], "batch", where);
    if (s.tokens()) {
      step.seq_len = r.positive(steps[i], "seq_len", where);
    } else {
      const nlohmann::json& input = r.field(steps[i], "input", where);
      if (!input.is_array() || input.size() != 3)
        r.fail(where + ": \"input\" must be [C, H, W], found " + input.dump());
      const nlohmann::json dims = {{"C", input[0]}, {"H", input[1]}, {"W", input[2]}};
      step.channels = r.positive(dims, "C", where + " input");
      step.height = r.positive(dims, "H", where + " input");
      step.width = r.positive(dims, "W", where + " input");
    }
    s.steps.push_back(step);
  }
  return s;
}

void save_shape_schedule(const std::string& path, const ShapeSchedule& schedule) {
  io::write_text_atomically(path, shape_schedule_json(schedule).dump(1) + "\n");
}

ShapeSchedule load_shape_schedule(const std::string& path) {
  const std::string text =
      io::read_input_file(path, {.max_bytes = kMaxScheduleBytes, .what = "--shape-schedule"});
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ValueError("--shape-schedule " + path + ": not valid JSON");
  return shape_schedule_from_json(j, "--shape-schedule " + path);
}

void check_schedule_for_run(const ShapeSchedule& schedule, const ScheduleNeeds& needs) {
  if (schedule.tokens() != needs.language_model)
    throw ValueError(fmt::format("shape schedule: {} takes {}, the schedule holds {}", needs.model,
                                 needs.language_model ? "token windows (--seq-len-range)" : "images (--resolutions)",
                                 schedule.tokens() ? "token windows" : "images"));
  if (static_cast<std::int64_t>(schedule.steps.size()) < needs.steps)
    throw ValueError(fmt::format("shape schedule: {} steps, but the run needs {} ({})", schedule.steps.size(),
                                 needs.steps, needs.steps_source));
  const std::int64_t longest = std::max(schedule.max_len, schedule.longest());
  if (needs.language_model && longest > needs.context)
    throw ValueError(fmt::format("shape schedule: a length of {} passes {}'s context of {} ({})", longest, needs.model,
                                 needs.context, needs.context_hint));
}

std::uint64_t steps_digest(const ShapeSchedule& schedule, std::int64_t count) {
  if (count < 0 || count > static_cast<std::int64_t>(schedule.steps.size()))
    throw ValueError(fmt::format("shape schedule: a digest of {} steps asked of a schedule of {}", count,
                                 schedule.steps.size()));
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  const auto mix = [&hash](std::int64_t value) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= (static_cast<std::uint64_t>(value) >> (8 * byte)) & 0xff;
      hash *= 0x100000001b3ULL;
    }
  };
  for (std::int64_t i = 0; i < count; ++i) {
    const ShapeStep& s = schedule.steps[static_cast<std::size_t>(i)];
    for (std::int64_t v : {s.batch, s.seq_len, s.channels, s.height, s.width}) mix(v);
  }
  return hash;
}

}  // namespace sublet::data
