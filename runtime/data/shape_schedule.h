#pragma once
// A seeded schedule of input shapes, one entry per training step, so that a run sees changing
// tensor sizes as real training with variable lengths or resolutions does: `sublet train` draws
// each GPT step's window length and batch from it, `bench step` and `profile` time and study the
// same shapes (warm-up steps first), and bench/pytorch_step.py runs them from the same JSON file.
//
// Tokens (GPT models): each step's length is drawn uniformly from [min, max] and rounded up to a
// multiple of `multiple` (8 by default: a bounded set of lengths keeps per-shape caches small
// while the allocator still sees sizes change); the batch is max(1, tokens_per_batch / length).
// Images: each step's resolution is drawn uniformly from a list (R means CxRxR); the batch is fixed.
//
//   ShapeSchedule s = token_schedule({.seed = 0, .steps = 60, .min_len = 64, .max_len = 1024,
//                                     .tokens_per_batch = 16384});
//   save_shape_schedule("shapes.json", s);   ... load_shape_schedule("shapes.json") == s
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sublet::data {

inline constexpr int kShapeScheduleVersion = 1;
inline constexpr std::int64_t kDefaultSeqLenMultiple = 8;

struct ShapeStep {
  std::int64_t batch = 0;
  std::int64_t seq_len = 0;  // tokens: the window length
  std::int64_t channels = 0, height = 0, width = 0;  // images
  bool operator==(const ShapeStep&) const = default;
};

struct ShapeSchedule {
  enum class Kind { Tokens, Images };
  Kind kind = Kind::Tokens;
  std::uint64_t seed = 0;
  // How the steps were drawn (kept in the file so that a reader can see and redraw them).
  std::int64_t min_len = 0, max_len = 0, multiple = kDefaultSeqLenMultiple, tokens_per_batch = 0;  // tokens
  std::int64_t batch_size = 0, channels = 0;                                                     // images
  std::vector<std::int64_t> resolutions;                                                          // images
  std::vector<ShapeStep> steps;
  bool operator==(const ShapeSchedule&) const = default;

  bool tokens() const { return kind == Kind::Tokens; }
  std::int64_t longest() const;        // tokens: the largest seq_len of the steps
  std::int64_t most_tokens() const;    // tokens: the largest batch x seq_len of the steps
  // "seq 64..1024 (x8), ~16384 tokens/step" or "3x{224,192,160}"
  std::string describe() const;
};

struct TokenScheduleSpec {
  std::uint64_t seed = 0;
  std::int64_t steps = 0;
  std::int64_t min_len = 0, max_len = 0;
  std::int64_t tokens_per_batch = 0;
  std::int64_t multiple = kDefaultSeqLenMultiple;
};
// ValueError for non-positive values, min > max, or a max that is not a multiple of `multiple`
// (a rounded length would pass it).
ShapeSchedule token_schedule(const TokenScheduleSpec& spec);

struct ImageScheduleSpec {
  std::uint64_t seed = 0;
  std::int64_t steps = 0;
  std::int64_t batch_size = 0;
  std::int64_t channels = 3;
  std::vector<std::int64_t> resolutions;
};
ShapeSchedule image_schedule(const ImageScheduleSpec& spec);

// "64:1024" -> {64, 1024}; "224,192,160" -> {224, 192, 160}. ValueError naming the flag and text.
std::pair<std::int64_t, std::int64_t> parse_seq_len_range(const std::string& text);
std::vector<std::int64_t> parse_resolutions(const std::string& text);

// {"format": "sublet-shape-schedule", "version": 1, "kind": "tokens"|"images", "seed": ...,
//  tokens: "seq_len_min", "seq_len_max", "multiple", "tokens_per_batch";
//  images: "batch_size", "channels", "resolutions";
//  "steps": [{"batch": B, "seq_len": T}, ...] or [{"batch": B, "input": [C, H, W]}, ...]}
nlohmann::json shape_schedule_json(const ShapeSchedule& schedule);
// Validates everything (format, version, kind, every step positive); ValueError naming `source`
// and what was expected and found.
ShapeSchedule shape_schedule_from_json(const nlohmann::json& j, const std::string& source);
void save_shape_schedule(const std::string& path, const ShapeSchedule& schedule);
ShapeSchedule load_shape_schedule(const std::string& path);  // IoError when unreadable

// What a run needs of a schedule, for the checks before its first step: the shapes its model
// takes, the longest window it takes (GPT), how many entries it reads, and for the errors where
// those come from (`steps_source` "warm-up + timed steps", `context_hint` "--block-size sets a
// longer one").
struct ScheduleNeeds {
  std::string model;
  bool language_model = false;
  std::int64_t context = 0;
  std::int64_t steps = 0;
  std::string steps_source;
  std::string context_hint;
};
// ValueError naming what was expected and found: another kind of shapes than the model takes,
// fewer steps than needed, or a longest length (the drawn MAX, or a file's longest step) past
// the context.
void check_schedule_for_run(const ShapeSchedule& schedule, const ScheduleNeeds& needs);

// A digest of the first `count` steps (FNV-1a over their numbers), so that a resumed run can
// tell whether its schedule gave the steps already trained the same shapes. ValueError when the
// schedule has fewer steps.
std::uint64_t steps_digest(const ShapeSchedule& schedule, std::int64_t count);

}  // namespace sublet::data
