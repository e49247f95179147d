#pragma once
// Allocator statistics with PyTorch's names, so torch.cuda.memory_stats() habits carry over.
#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace sublet::memory {

struct Stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;  // accumulated increases
  std::int64_t freed = 0;      // accumulated decreases

  void increase(std::int64_t amount) {
    current += amount;
    allocated += amount;
    if (current > peak) peak = current;
  }
  void decrease(std::int64_t amount) {
    current -= amount;
    freed += amount;
  }
  void reset_peak() { peak = current; }
  void reset_accumulated() { allocated = 0; freed = 0; }
};

enum class StatType : std::size_t { All = 0, SmallPool = 1, LargePool = 2 };
inline constexpr std::size_t kNumStatTypes = 3;

// One Stat per pool breakdown: [all, small_pool, large_pool].
struct StatArray {
  std::array<Stat, kNumStatTypes> by_type;
  Stat& operator[](StatType t) { return by_type[static_cast<std::size_t>(t)]; }
  const Stat& operator[](StatType t) const { return by_type[static_cast<std::size_t>(t)]; }
  // Updates "all" and the given pool together.
  void increase(bool small_pool, std::int64_t amount) {
    by_type[0].increase(amount);
    by_type[small_pool ? 1 : 2].increase(amount);
  }
  void decrease(bool small_pool, std::int64_t amount) {
    by_type[0].decrease(amount);
    by_type[small_pool ? 1 : 2].decrease(amount);
  }
};

struct DeviceStats {
  StatArray allocation;            // blocks handed to callers (count)
  StatArray segment;               // segments held from the backend (count)
  StatArray active;                // blocks in use or waiting for stream events (count)
  StatArray inactive_split;        // free blocks inside split segments (count)
  StatArray allocated_bytes;
  StatArray reserved_bytes;
  StatArray active_bytes;
  StatArray inactive_split_bytes;
  StatArray requested_bytes;       // sizes as asked for, before rounding

  std::int64_t num_alloc_retries = 0;      // backend failed; cache freed; retried
  std::int64_t num_ooms = 0;               // OutOfMemoryError thrown
  std::int64_t num_device_alloc = 0;       // backend allocate/map calls
  std::int64_t num_device_free = 0;        // backend deallocate/unmap calls
  std::int64_t num_sync_all_streams = 0;   // device synchronisations to free the cache
  // sublet's own: waits a stream enqueued before reusing bytes another stream may still use
  // (stream-ordered reuse, caching_allocator_events.cpp); each one is a host wait avoided.
  std::int64_t num_stream_ordered_reuses = 0;
  Stat oversize_allocations;               // blocks >= max_split_size handed out
  Stat oversize_segments;                  // segments >= max_split_size held

  std::int64_t max_split_size = -1;        // the config echoed, as PyTorch does (-1 = unlimited)

  // The flat map of torch.cuda.memory_stats(): "allocated_bytes.all.current", ...
  std::map<std::string, std::int64_t> to_map() const;
  void reset_peak();
  void reset_accumulated();
};

}  // namespace sublet::memory
