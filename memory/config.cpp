#include "memory/config.h"

#include <array>
#include <bit>
#include <cstdlib>
#include <sstream>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/errors.h"
#include "core/printable.h"

namespace sublet::memory {
namespace {

std::string trim(std::string_view s) {
  const auto begin = s.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return "";
  const auto end = s.find_last_not_of(" \t");
  return std::string(s.substr(begin, end - begin + 1));
}

// The variable the text came from ("SUBLET_ALLOC_CONF" or "PYTORCH_CUDA_ALLOC_CONF"), named in
// every error. Set for the duration of one parse() call on this thread.
thread_local const char* parsing_variable = kSubletAllocConf;

[[noreturn]] void fail(const std::string& key, const std::string& value, const std::string& allowed) {
  throw ConfigError(std::string(parsing_variable) + ": bad value '" + printable(value) + "' for " + printable(key) +
                    ": expected " + allowed);
}

// Splits on commas that are not inside [...].
std::vector<std::string> split_options(const std::string& text) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (depth != 0) throw ConfigError(std::string(parsing_variable) + ": unbalanced brackets in '" + printable(text) + "'");
  parts.push_back(current);
  return parts;
}

std::size_t parse_unsigned(const std::string& key, const std::string& value, const std::string& allowed) {
  if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos || value.size() > 18)
    fail(key, value, allowed);
  return std::stoull(value);
}

constexpr std::size_t kMaxDivisions = std::size_t{1} << 30;

// A single value must be a power of two; a list entry may also be 0 ("no rounding" for that
// interval), as PyTorch accepts.
std::size_t parse_division(const std::string& key, const std::string& value, bool zero_allowed) {
  const std::string allowed = zero_allowed ? "0 (no rounding) or a power of two up to 2^30 (1073741824) in a list entry"
                                           : "a power of two (1, 2, 4, ..., at most 2^30 = 1073741824), or a list like [256:1,512:2,>:8]";
  const std::size_t v = parse_unsigned(key, value, allowed);
  if (v == 0 && zero_allowed) return 0;
  if (v == 0 || !std::has_single_bit(v) || v > kMaxDivisions) fail(key, value, allowed);
  return v;
}

// The last interval holding sizes below `mib` (a power of two): intervals are [2^i, 2^(i+1)) MiB,
// and interval 0 also holds everything below 1 MiB.
std::size_t last_interval_below(std::size_t mib) {
  const auto log2_mib = static_cast<std::size_t>(std::countr_zero(mib));
  return log2_mib == 0 ? 0 : log2_mib - 1;
}

// "[256:1,512:2,>:8]" as PyTorch documents it: sizes under 256 MiB round with 1 division,
// sizes in [256, 512) MiB with 2, larger sizes with 8.
void parse_division_list(const std::string& value, AllocatorConfig& config) {
  const std::string key = "roundup_power2_divisions";
  const std::string allowed = "a list [SIZE_MB:DIVISIONS,...,>:DIVISIONS] with SIZE_MB powers of two in increasing order";
  const std::string inner = value.substr(1, value.size() - 2);
  std::size_t next_index = 0;
  bool saw_rest = false;
  for (const std::string& raw : split_options(inner)) {
    const std::string entry = trim(raw);
    const auto colon = entry.find(':');
    if (colon == std::string::npos || saw_rest) fail(key, value, allowed);
    const std::string size_text = trim(entry.substr(0, colon));
    const std::size_t divisions = parse_division(key, trim(entry.substr(colon + 1)), true);
    if (size_text == ">") {
      for (std::size_t i = next_index; i < AllocatorConfig::kRoundupIntervals; ++i) config.roundup_power2_divisions[i] = divisions;
      next_index = AllocatorConfig::kRoundupIntervals;
      saw_rest = true;
      continue;
    }
    const std::size_t mib = parse_unsigned(key, size_text, allowed);
    if (mib == 0 || !std::has_single_bit(mib)) fail(key, value, allowed + " (" + size_text + " is not a power of two)");
    const std::size_t last = std::min(last_interval_below(mib), AllocatorConfig::kRoundupIntervals - 1);
    if (last < next_index && next_index != 0) fail(key, value, allowed + " (sizes must increase)");
    for (std::size_t i = next_index; i <= last; ++i) config.roundup_power2_divisions[i] = divisions;
    next_index = last + 1;
  }
}

bool parse_bool(const std::string& key, const std::string& value) {
  if (value == "True" || value == "true" || value == "1") return true;
  if (value == "False" || value == "false" || value == "0") return false;
  fail(key, value, "True or False");
}

}  // namespace

std::size_t AllocatorConfig::divisions_for(std::size_t size) const {
  const std::size_t log_size = static_cast<std::size_t>(std::bit_width(size) - 1);
  const std::size_t start = 20;  // log2(1 MiB)
  const std::size_t index = log_size > start ? log_size - start : 0;
  return roundup_power2_divisions[std::min(index, kRoundupIntervals - 1)];
}

AllocatorConfig AllocatorConfig::parse(const std::string& text, const AllocatorConfig& defaults) {
  return parse(text, defaults, kSubletAllocConf);
}

AllocatorConfig AllocatorConfig::parse(const std::string& text, const AllocatorConfig& defaults, const char* variable) {
  struct VariableScope {
    const char* saved = parsing_variable;
    explicit VariableScope(const char* v) { parsing_variable = v; }
    ~VariableScope() { parsing_variable = saved; }
  } scope(variable);
  AllocatorConfig config = defaults;
  if (trim(text).empty()) return config;
  for (const std::string& raw : split_options(text)) {
    const std::string option = trim(raw);
    if (option.empty()) continue;
    const auto colon = option.find(':');
    if (colon == std::string::npos)
      throw ConfigError(std::string(parsing_variable) + ": option '" + printable(option) + "' has no value; expected key:value");
    const std::string key = trim(option.substr(0, colon));
    const std::string value = trim(option.substr(colon + 1));
    if (key == "max_split_size_mb") {
      // PyTorch: "must be > 20" (the large-segment size): a smaller limit would leave segments
      // that no block may split.
      const std::string allowed = "an integer number of MiB > 20 (the large-segment size) and at most 2^40 (1099511627776)";
      const std::size_t mb = parse_unsigned(key, value, allowed);
      if (mb <= 20 || mb > (std::size_t{1} << 40)) fail(key, value, allowed);
      config.max_split_size = mb * kMiB;
    } else if (key == "roundup_power2_divisions") {
      if (!value.empty() && value.front() == '[') {
        if (value.back() != ']') fail(key, value, "a list closed by ']'");
        parse_division_list(value, config);
      } else {
        config.roundup_power2_divisions.fill(parse_division(key, value, false));
      }
    } else if (key == "expandable_segments") {
      config.expandable_segments = parse_bool(key, value);
    } else if (key == "garbage_collection_threshold") {
      const std::string allowed = "a number strictly between 0 and 1, e.g. 0.6";
      double threshold = 0;
      std::istringstream in(value);
      if (!(in >> threshold) || !in.eof() || !(threshold > 0.0 && threshold < 1.0)) fail(key, value, allowed);
      config.garbage_collection_threshold = threshold;
    } else {
      throw ConfigError(std::string(parsing_variable) + ": unknown option '" + printable(key) + "' (value '" + printable(value) +
                        "'); known options: max_split_size_mb, roundup_power2_divisions, "
                        "expandable_segments, garbage_collection_threshold");
    }
  }
  return config;
}

namespace {

// PyTorch's current name for its variable; it reads it before the older PYTORCH_CUDA_ALLOC_CONF.
constexpr const char* kPytorchAllocConfCurrent = "PYTORCH_ALLOC_CONF";
// Looked at in this order: the first one set (not blank) is used, the later ones are ignored.
constexpr std::array<const char*, 3> kAllocConfVariables = {kSubletAllocConf, kPytorchAllocConfCurrent, kPytorchAllocConf};

bool is_set(const char* variable) {
  const char* value = std::getenv(variable);
  return value != nullptr && !trim(value).empty();
}

// The variables set after `used` in the order above.
std::vector<std::string> ignored_after(const std::string& used) {
  std::vector<std::string> ignored;
  bool after = false;
  for (const char* variable : kAllocConfVariables) {
    if (after && is_set(variable)) ignored.push_back(variable);
    after = after || used == variable;
  }
  return ignored;
}

}  // namespace

ConfigOrigin config_origin_from_environment() {
  ConfigOrigin origin;
  for (const char* variable : kAllocConfVariables) {
    if (!is_set(variable)) continue;
    origin.variable = variable;
    origin.text = std::getenv(variable);
    break;
  }
  origin.ignored_pytorch = !origin.variable.empty() && !ignored_after(origin.variable).empty();
  return origin;
}

std::string ConfigOrigin::describe() const {
  if (variable.empty()) return "defaults (SUBLET_ALLOC_CONF, PYTORCH_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF unset)";
  std::string out = "from " + variable;
  const std::vector<std::string> ignored = ignored_pytorch ? ignored_after(variable) : std::vector<std::string>{};
  if (!ignored.empty()) {
    out += "; ";
    for (std::size_t i = 0; i < ignored.size(); ++i) out += (i == 0 ? "" : " and ") + ignored[i];
    out += " ignored because " + variable + " is set";
  }
  return out;
}

AllocatorConfig AllocatorConfig::from_environment(const AllocatorConfig& defaults) {
  const ConfigOrigin origin = config_origin_from_environment();
  return origin.variable.empty() ? defaults : parse(origin.text, defaults, origin.variable.c_str());
}

void AllocatorConfig::validate() const {
  if (max_split_size_set() && max_split_size <= 20 * kMiB)
    throw ConfigError("AllocatorConfig: max_split_size must be > 20 MiB, got " + std::to_string(max_split_size) + " bytes");
  for (std::size_t d : roundup_power2_divisions)
    if (d > 1 && !std::has_single_bit(d))
      throw ConfigError("AllocatorConfig: roundup_power2_divisions must be powers of two, got " + std::to_string(d));
  if (garbage_collection_threshold != 0.0 && !(garbage_collection_threshold > 0.0 && garbage_collection_threshold < 1.0))
    throw ConfigError("AllocatorConfig: garbage_collection_threshold must be in (0, 1), got " + std::to_string(garbage_collection_threshold));
}

std::string AllocatorConfig::to_string() const {
  std::ostringstream out;
  const char* sep = "";
  if (max_split_size_set()) { out << "max_split_size_mb:" << max_split_size / kMiB; sep = ","; }
  bool any_division = false;
  for (std::size_t d : roundup_power2_divisions) any_division |= d > 1;
  if (any_division) {
    out << sep << "roundup_power2_divisions:[";
    for (std::size_t i = 0; i < kRoundupIntervals; ++i) {
      if (i + 1 < kRoundupIntervals) out << (std::size_t{1} << (i + 1)) << ":" << std::max<std::size_t>(roundup_power2_divisions[i], 1) << ",";
      else out << ">:" << std::max<std::size_t>(roundup_power2_divisions[i], 1);
    }
    out << "]";
    sep = ",";
  }
  if (expandable_segments) { out << sep << "expandable_segments:True"; sep = ","; }
  if (garbage_collection_threshold > 0)  // shortest text that parses back to the same double
    out << sep << "garbage_collection_threshold:" << fmt::format("{}", garbage_collection_threshold);
  return out.str();
}

}  // namespace sublet::memory
