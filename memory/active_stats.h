#pragma once
// PyTorch's "active" families (blocks in use or waiting for other streams' events) equal the
// allocated ones except while freed blocks wait for stream events (record_stream). Keeping both
// on every allocate and free doubled the statistics' stores on the hot path, and every store
// there must drain before the allocator's lock can be taken again. So the allocator keeps the
// waiting ("pending") blocks apart, on the rare path, and derives the active families when the
// statistics are read:
//   active.current = allocation.current + pending.current
//   active.peak    = max(allocation.peak, highest allocation + pending seen while any was pending)
// Active only rises when an allocation does (a free with pending events moves bytes from
// allocated to pending; an event completing lowers active), so checking at allocations suffices.
#include <algorithm>
#include <array>
#include <cstdint>

#include "memory/stats.h"

namespace sublet::memory {

class ActiveStats {
 public:
  // After allocation/allocated_bytes rose in `small`'s pool.
  void on_allocate(const DeviceStats& s, bool small) {
    if (pending_blocks_[StatType::All].current == 0) return;
    for (const StatType t : {StatType::All, small ? StatType::SmallPool : StatType::LargePool}) {
      raise(peak_blocks_, t, s.allocation[t].current + pending_blocks_[t].current);
      raise(peak_bytes_, t, s.allocated_bytes[t].current + pending_bytes_[t].current);
    }
  }
  // A freed block starts waiting for stream events, or stops waiting.
  void begin_pending(bool small, std::int64_t bytes) {
    pending_blocks_.increase(small, 1);
    pending_bytes_.increase(small, bytes);
  }
  void end_pending(bool small, std::int64_t bytes) {
    pending_blocks_.decrease(small, 1);
    pending_bytes_.decrease(small, bytes);
  }

  // `s` with its active families filled in.
  void fill(DeviceStats& s) const {
    derive(s.active, s.allocation, pending_blocks_, peak_blocks_);
    derive(s.active_bytes, s.allocated_bytes, pending_bytes_, peak_bytes_);
  }
  // With DeviceStats::reset_peak(): the peaks restart at the current values.
  void reset_peak(const DeviceStats& s) {
    for (std::size_t t = 0; t < kNumStatTypes; ++t) {
      peak_blocks_.by_type[t] = s.allocation.by_type[t].current + pending_blocks_.by_type[t].current;
      peak_bytes_.by_type[t] = s.allocated_bytes.by_type[t].current + pending_bytes_.by_type[t].current;
    }
  }
  void reset_accumulated() {
    for (StatArray* a : {&pending_blocks_, &pending_bytes_})
      for (Stat& stat : a->by_type) stat.reset_accumulated();
  }

 private:
  struct Peaks {
    std::array<std::int64_t, kNumStatTypes> by_type{};
  };
  static void raise(Peaks& p, StatType t, std::int64_t value) {
    auto& peak = p.by_type[static_cast<std::size_t>(t)];
    if (value > peak) peak = value;
  }
  static void derive(StatArray& active, const StatArray& allocated, const StatArray& pending, const Peaks& peaks) {
    for (std::size_t t = 0; t < kNumStatTypes; ++t) {
      const Stat& a = allocated.by_type[t];
      const Stat& p = pending.by_type[t];
      Stat& out = active.by_type[t];
      out.current = a.current + p.current;
      out.peak = std::max(a.peak, peaks.by_type[t]);
      out.allocated = a.allocated;  // active rises exactly when allocated does
      out.freed = a.freed - p.allocated + p.freed;  // a pending free lowers active only when it ends
    }
  }

  StatArray pending_blocks_;
  StatArray pending_bytes_;
  Peaks peak_blocks_;
  Peaks peak_bytes_;
};

}  // namespace sublet::memory
