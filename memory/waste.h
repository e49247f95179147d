#pragma once
// The allocator's waste at one moment, split into kinds (docs/fragmentation.md). Every reserved
// byte is either requested by a live block or exactly one kind of waste:
//   reserved = requested + rounding + holes + free segments + mapped but unused
// "Live" blocks are allocated or freed but still waiting for another stream's events.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "memory/config.h"

namespace sublet::memory {

// Bytes of one kind, by the pool of the segment they lie in (private pools by their size class).
struct PoolBytes {
  std::size_t small_pool = 0;
  std::size_t large_pool = 0;
  std::size_t all() const { return small_pool + large_pool; }
  void add(bool small, std::size_t bytes) { (small ? small_pool : large_pool) += bytes; }
};

enum class WasteKind : std::uint8_t { Rounding, Holes, FreeSegments, MappedUnused };

struct WasteSplit {
  std::size_t reserved = 0;   // reserved_bytes.all.current at that moment (the allocator's counter)
  std::size_t requested = 0;  // bytes the live blocks were asked for
  // Live blocks' bytes beyond their requests: sizes rounded up (512 B granule, power-of-two
  // divisions) and blocks handed out whole because their remainder was not worth splitting off.
  std::size_t rounding = 0;
  std::size_t rounding_of_sizes = 0;  // of `rounding`: what size rounding added (the rest: blocks kept whole)
  PoolBytes holes;                    // free blocks in segments that also hold live blocks
  PoolBytes free_segments;            // fixed segments with no live block
  // Out-of-memory only: of free_segments, those of another pool or another stream than the request's.
  std::size_t free_segments_elsewhere = 0;
  // Expandable segments: mapped bytes after the segment's last live block.
  std::size_t mapped_unused = 0;

  std::size_t wasted() const { return rounding + holes.all() + free_segments.all() + mapped_unused; }
  std::size_t of(WasteKind kind) const;
  // The kind with the most bytes (ties: the order of WasteKind).
  WasteKind largest() const;
};

// "rounding", "holes", "free segments", "mapped but unused".
const char* waste_kind_name(WasteKind kind);

// memory_stats()'s flat keys: waste.<kind>_bytes.<all|small_pool|large_pool>.<current|at_peak>,
// with waste.requested_bytes and waste.reserved_bytes for the two figures they add up to.
void put_waste_stats(std::map<std::string, std::int64_t>& out, const WasteSplit& now, const WasteSplit& at_peak);

// memory_summary()'s section below PyTorch's table: the split now and at the reserved peak.
std::string waste_summary_section(const WasteSplit& now, const WasteSplit& at_peak);

// One sentence for the out-of-memory message: the split at the failure.
std::string waste_sentence(const WasteSplit& split);

// The setting that addresses `kind` under `config`, as advice text (starting with a space);
// empty when none applies or the one that would is already on. `after_cache_release`: the split
// was taken after the allocator gave back every cached segment it could (an out-of-memory error),
// so free segments left are those of private pools still held.
std::string waste_knob_advice(WasteKind kind, const WasteSplit& split, const AllocatorConfig& config,
                              bool after_cache_release);

}  // namespace sublet::memory
