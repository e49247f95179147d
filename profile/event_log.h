#pragma once
// The allocation history of a profiled run, with a running event count that hooks can read
// cheaply. A module hook records "events so far" at its entry and exit; every figure of the
// layer table is then computed from the history between those two marks, after the run, with
// the categories blocks ended up with (autograd re-tags saved tensors Activation after they were
// allocated, so the category is only final when the block is freed).
//
// The allocator has one observer slot: the log takes it and forwards each event to an
// AllocationHistory (memory/history.h) and its counter. The clock starts with the history, so
// hook times and event times are on one time line.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "memory/caching_allocator.h"
#include "memory/history.h"

namespace sublet::profile {

// What the allocator held when recording began: the history alone cannot know it.
struct Baseline {
  std::size_t allocated = 0;
  std::size_t reserved = 0;
  std::vector<memory::SegmentInfo> segments;
};

class EventLog {
 public:
  // Starts recording `allocator`'s events; `capacity` bounds the history (events beyond it are
  // an error when read back, not silently dropped: the layer figures would be wrong).
  explicit EventLog(memory::CachingAllocator& allocator, std::size_t capacity = std::size_t{1} << 22);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Events recorded so far: the index the next event will have in events().
  std::uint64_t count() const { return count_.load(std::memory_order_acquire); }
  // Nanoseconds on the history's clock (HistoryEvent::time_ns).
  std::int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
  }
  // Stops recording (idempotent); events() stays readable.
  void stop();

  // Every event, oldest first. Throws Error if the history dropped any.
  std::vector<memory::HistoryEvent> events() const;
  const Baseline& baseline() const { return baseline_; }
  memory::CachingAllocator& allocator() const { return allocator_; }

 private:
  memory::CachingAllocator& allocator_;
  memory::AllocationHistory history_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<std::uint64_t> count_{0};
  Baseline baseline_;
  bool recording_ = false;
};

}  // namespace sublet::profile
