// The waste split's words and figures: memory_stats() keys, memory_summary()'s section, the
// out-of-memory sentence and the setting that addresses each kind.
#include "memory/waste.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/format_bytes.h"

namespace sublet::memory {
namespace {

constexpr std::array<WasteKind, 4> kKinds = {WasteKind::Rounding, WasteKind::Holes, WasteKind::FreeSegments,
                                             WasteKind::MappedUnused};

std::string bytes(std::size_t v) { return format_bytes(static_cast<std::int64_t>(v)); }

// memory_summary()'s cell: the unit follows the row's larger figure, as PyTorch's rows do.
std::string cell(std::size_t value, std::size_t reference) {
  static constexpr std::array<const char*, 6> kPrefixes = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
  std::size_t prefix = 0;
  auto size = static_cast<std::int64_t>(value);
  double ref = static_cast<double>(reference);
  while (prefix + 1 < kPrefixes.size() && ref >= 768.0 * 1024.0) {
    size /= 1024;
    ref /= 1024.0;
    ++prefix;
  }
  return fmt::format("{:6d} {}", size, kPrefixes[prefix]);
}

std::size_t largest_division(const AllocatorConfig& config) {
  return *std::max_element(config.roundup_power2_divisions.begin(), config.roundup_power2_divisions.end());
}

}  // namespace

std::size_t WasteSplit::of(WasteKind kind) const {
  switch (kind) {
    case WasteKind::Rounding: return rounding;
    case WasteKind::Holes: return holes.all();
    case WasteKind::FreeSegments: return free_segments.all();
    case WasteKind::MappedUnused: return mapped_unused;
  }
  return 0;
}

WasteKind WasteSplit::largest() const {
  WasteKind best = WasteKind::Rounding;
  for (WasteKind k : kKinds)
    if (of(k) > of(best)) best = k;
  return best;
}

const char* waste_kind_name(WasteKind kind) {
  switch (kind) {
    case WasteKind::Rounding: return "rounding";
    case WasteKind::Holes: return "holes";
    case WasteKind::FreeSegments: return "free segments";
    case WasteKind::MappedUnused: return "mapped but unused";
  }
  return "?";
}

void put_waste_stats(std::map<std::string, std::int64_t>& out, const WasteSplit& now, const WasteSplit& at_peak) {
  const auto put = [&](const std::string& name, std::size_t current, std::size_t peak) {
    out["waste." + name + ".current"] = static_cast<std::int64_t>(current);
    out["waste." + name + ".at_peak"] = static_cast<std::int64_t>(peak);
  };
  const auto put_pools = [&](const std::string& name, const PoolBytes& current, const PoolBytes& peak) {
    put(name + ".all", current.all(), peak.all());
    put(name + ".small_pool", current.small_pool, peak.small_pool);
    put(name + ".large_pool", current.large_pool, peak.large_pool);
  };
  put("reserved_bytes.all", now.reserved, at_peak.reserved);
  put("requested_bytes.all", now.requested, at_peak.requested);
  put("rounding_bytes.all", now.rounding, at_peak.rounding);
  put_pools("holes_bytes", now.holes, at_peak.holes);
  put_pools("free_segments_bytes", now.free_segments, at_peak.free_segments);
  put("mapped_unused_bytes.all", now.mapped_unused, at_peak.mapped_unused);
}

std::string waste_summary_section(const WasteSplit& now, const WasteSplit& at_peak) {
  const std::string rule_eq = "|" + std::string(75, '=') + "|\n";
  const std::string rule_dash = "|" + std::string(75, '-') + "|\n";
  std::string out = fmt::format("|{:^75}|\n", "Reserved memory by use: requested bytes and the kinds of waste");
  out += rule_dash;
  out += fmt::format("| {:<21} | {:^10} | {:^10} | {:<23} |\n", "Use", "Now", "Res. Peak", "");
  out += rule_dash;
  const auto row = [&](const std::string& name, std::size_t a, std::size_t b, const std::string& note) {
    out += fmt::format("| {:<21} | {} | {} | {:<23} |\n", name, cell(a, std::max(a, b)), cell(b, std::max(a, b)), note);
  };
  row("Requested by tensors", now.requested, at_peak.requested, "live blocks asked for");
  row("Rounding", now.rounding, at_peak.rounding, "live blocks beyond ask");
  row("Holes", now.holes.all(), at_peak.holes.all(), "free, in live segments");
  row("      in large pool", now.holes.large_pool, at_peak.holes.large_pool, "");
  row("      in small pool", now.holes.small_pool, at_peak.holes.small_pool, "");
  row("Free segments", now.free_segments.all(), at_peak.free_segments.all(), "no live block in them");
  row("      in large pool", now.free_segments.large_pool, at_peak.free_segments.large_pool, "");
  row("      in small pool", now.free_segments.small_pool, at_peak.free_segments.small_pool, "");
  row("Mapped but unused", now.mapped_unused, at_peak.mapped_unused, "expandable, past live");
  out += rule_dash;
  row("Reserved memory", now.reserved, at_peak.reserved, "the sum of the above");
  out += rule_eq;
  return out;
}

std::string waste_sentence(const WasteSplit& s) {
  std::string text = fmt::format(
      " The {} reserved holds {} requested by live tensors and {} of waste: rounding {}, holes between live "
      "blocks {} (large pool {}, small pool {}), free segments {}",
      bytes(s.reserved), bytes(s.requested), bytes(s.wasted()), bytes(s.rounding), bytes(s.holes.all()),
      bytes(s.holes.large_pool), bytes(s.holes.small_pool), bytes(s.free_segments.all()));
  if (s.free_segments_elsewhere != 0)
    text += fmt::format(" ({} of another pool or stream)", bytes(s.free_segments_elsewhere));
  text += fmt::format(", mapped but unused {}.", bytes(s.mapped_unused));
  if (s.wasted() != 0) text += fmt::format(" The largest kind is {}.", waste_kind_name(s.largest()));
  return text;
}

std::string waste_knob_advice(WasteKind kind, const WasteSplit& s, const AllocatorConfig& config,
                              bool after_cache_release) {
  std::string advice;
  switch (kind) {
    case WasteKind::Holes:
      if (!config.expandable_segments) {
        advice += " Holes between live blocks: try SUBLET_ALLOC_CONF=expandable_segments:True, which grows one "
                  "segment per stream instead of many, so freed blocks merge and its tail serves any size.";
        if (!config.max_split_size_set() && s.holes.large_pool != 0)
          advice += " Setting max_split_size_mb (e.g. max_split_size_mb:128) stops large cached blocks from being "
                    "split by smaller requests, which leaves such holes.";
      }
      break;
    case WasteKind::Rounding: {
      const std::size_t divisions = largest_division(config);
      if (divisions > 1 && 2 * s.rounding_of_sizes >= s.rounding) {
        advice += fmt::format(
            " Most rounding comes from roundup_power2_divisions (at most {} steps per power of two now): more "
            "divisions round to finer steps.",
            divisions);
      } else if (!config.expandable_segments) {
        advice += " Most rounding is blocks handed out whole because their remainder was too small to split off "
                  "(up to 1 MiB in the large pool): expandable_segments:True splits off any remainder of 512 B or more.";
      }
      break;
    }
    case WasteKind::FreeSegments:
      if (after_cache_release) {
        advice += " The free segments left belong to private pools (CUDA graphs) still held: release_private_pool() "
                  "gives them back.";
      } else {
        advice += " empty_cache() gives free segments back";
        advice += config.garbage_collection_threshold > 0.0
                      ? "."
                      : "; garbage_collection_threshold:0.6 (with a memory fraction set) does so when reserved "
                        "memory nears the limit.";
      }
      break;
    case WasteKind::MappedUnused:
      // Only a partial page per segment is left once the cache was released: no setting helps.
      if (!after_cache_release) advice += " empty_cache() unmaps the free tails of expandable segments.";
      break;
  }
  return advice;
}

}  // namespace sublet::memory
