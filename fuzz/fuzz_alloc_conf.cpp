// Any SUBLET_ALLOC_CONF text either parses to a valid config (that round-trips through its
// text form) or throws ConfigError; nothing else may happen.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "memory/config.h"
#include "core/errors.h"

namespace {
// 0 and 1 divisions both mean plain 512-byte rounding; the text form writes 1.
std::array<std::size_t, sublet::memory::AllocatorConfig::kRoundupIntervals> effective(const sublet::memory::AllocatorConfig& c) {
  auto d = c.roundup_power2_divisions;
  for (auto& v : d) v = std::max<std::size_t>(v, 1);
  return d;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto config = sublet::memory::AllocatorConfig::parse(text);
    config.validate();
    const auto again = sublet::memory::AllocatorConfig::parse(config.to_string());
    if (again.max_split_size != config.max_split_size || again.expandable_segments != config.expandable_segments ||
        effective(again) != effective(config) ||
        again.garbage_collection_threshold != config.garbage_collection_threshold)
      std::abort();
  } catch (const sublet::ConfigError&) {
  }
  return 0;
}
