#pragma once
// Allocator knobs, with the keys and syntax of PyTorch's PYTORCH_CUDA_ALLOC_CONF so that what
// users learned there carries over:
//   max_split_size_mb:512,roundup_power2_divisions:16,expandable_segments:True,
//   garbage_collection_threshold:0.6      and the list form roundup_power2_divisions:[256:1,512:2,>:8]
// The environment is read in exactly one place (config_origin_from_environment): SUBLET_ALLOC_CONF,
// else PyTorch's PYTORCH_ALLOC_CONF, else its older PYTORCH_CUDA_ALLOC_CONF (same keys; PyTorch's
// own order for its two names), so that a PyTorch user's settings carry over; the first one set
// wins and the origin says which later ones were ignored.
#include <array>
#include <cstddef>
#include <limits>
#include <string>

namespace sublet::memory {

inline constexpr std::size_t kMiB = 1024 * 1024;
inline constexpr const char* kSubletAllocConf = "SUBLET_ALLOC_CONF";
inline constexpr const char* kPytorchAllocConf = "PYTORCH_CUDA_ALLOC_CONF";

// Where the environment's allocator settings come from.
struct ConfigOrigin {
  std::string variable;          // the variable used (SUBLET_ALLOC_CONF, PYTORCH_ALLOC_CONF, ...), or empty
  std::string text;              // that variable's value
  bool ignored_pytorch = false;  // a later variable was set too and not used (describe() names it)
  // "from PYTORCH_CUDA_ALLOC_CONF", "defaults (...unset)", "from SUBLET_ALLOC_CONF; PYTORCH_... ignored ..."
  std::string describe() const;
};
ConfigOrigin config_origin_from_environment();

struct AllocatorConfig {
  // Roundup divisions are chosen per power-of-two size interval starting at 1 MiB:
  // entry 0 covers sizes < 2 MiB, entry i covers [2^i MiB, 2^(i+1) MiB), the last covers the rest.
  static constexpr std::size_t kRoundupIntervals = 16;

  // Blocks at least this large are never split ("oversize"). Default: unlimited.
  std::size_t max_split_size = std::numeric_limits<std::size_t>::max();
  // 0 or 1 = plain 512-byte rounding for that interval.
  std::array<std::size_t, kRoundupIntervals> roundup_power2_divisions{};
  bool expandable_segments = false;
  // 0 = off. Otherwise, in (0, 1): fraction of the memory limit above which unused cached
  // segments are reclaimed before asking the backend (needs a per-process memory fraction).
  double garbage_collection_threshold = 0.0;
  // false: no cache at all (PyTorch's PYTORCH_NO_CUDA_MEMORY_CACHING=1): every request gets its
  // own segment from the backend and every free returns it at once. For baselines and debugging;
  // set from code (it has no SUBLET_ALLOC_CONF key, as in PyTorch).
  bool caching = true;

  // Applies the keys `text` names on top of `defaults` (a device's defaults: see
  // memory::default_config). Throws ConfigError naming the key, the value and what is allowed.
  static AllocatorConfig parse(const std::string& text, const AllocatorConfig& defaults);
  static AllocatorConfig parse(const std::string& text) { return parse(text, AllocatorConfig{}); }
  // The same, with `variable` (the environment variable the text came from) named in errors.
  static AllocatorConfig parse(const std::string& text, const AllocatorConfig& defaults, const char* variable);
  // The environment's settings (config_origin_from_environment) on top of `defaults`; the
  // defaults as they are when neither variable is set.
  static AllocatorConfig from_environment(const AllocatorConfig& defaults);
  static AllocatorConfig from_environment() { return from_environment(AllocatorConfig{}); }
  // The canonical text form (parse(to_string()) gives the same config).
  std::string to_string() const;

  bool max_split_size_set() const { return max_split_size != std::numeric_limits<std::size_t>::max(); }
  std::size_t divisions_for(std::size_t size) const;
  // Checks every field (for configs built in code); throws ConfigError.
  void validate() const;
};

}  // namespace sublet::memory
