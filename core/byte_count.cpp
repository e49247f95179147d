#include "core/byte_count.h"

#include <array>

#include <fmt/format.h>

namespace sublet {

std::string format_byte_count(std::uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  static constexpr std::array<const char*, 6> kUnits = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, kUnits[unit]);
}

}  // namespace sublet
