#pragma once
// Index checks that a CUDA graph carries into every replay. Eagerly, the kernels that index with
// device-resident integers (embedding ids, the losses' targets, gather and scatter_add) read a
// bad index back to the host and throw before they run (ops/cuda/index_check.h). A capture must
// not wait for the device, so while one records with a CapturedIndexChecks installed on the
// thread, each check is captured instead: every replay searches the indices on the device and
// writes the first bad position and its value to a verdict in pinned host memory; after the
// replay, throw_first_failure() throws the op's own error for the first check (in capture order)
// that found one. Without one installed, a capture records no check (replays run unchecked).
//
//   ops::CapturedIndexChecks checks;
//   checks.reserve(memory::pinned_allocator(), memory::pinned_host_stream());  // before capturing
//   graph.capture([&] { ops::CapturedIndexChecksScope scope(checks); step(); });
//   graph.replay(); /* wait for it */ checks.throw_first_failure();
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "memory/caching_allocator.h"

namespace sublet::ops {

// A check's verdict: the row-major position of the first index out of range, and its value.
struct OutOfRange {
  std::int64_t position = 0;
  std::int64_t value = 0;
};

// Throws the op's error for a bad index (a ValueError naming the op, the value and the range).
using OutOfRangeReport = std::function<void(const OutOfRange&)>;

class CapturedIndexChecks {
 public:
  static constexpr std::size_t kDefaultCapacity = 1024;

  // Room for `capacity` verdicts (two int64 each) from `allocator` (pinned host memory, which
  // kernels write directly under unified addressing), taken before the capture: allocating
  // pinned memory inside one is not allowed. Keeps the room it has when it is large enough.
  void reserve(memory::CachingAllocator& allocator, StreamHandle stream, std::size_t capacity = kDefaultCapacity);
  std::size_t capacity() const { return capacity_; }

  // One captured check (called by the backend while capturing): `device_scratch` is what its
  // replayed kernels search with, kept as long as the graph may replay. Returns its verdict,
  // [position (-1: none), value], which every replay writes and which reads "none" until then.
  // Error when the reserved room is used up (or was never reserved).
  std::int64_t* add(memory::ScopedBlock device_scratch, OutOfRangeReport report);
  // After a replay has finished: calls the report of each check whose verdict holds a bad index,
  // in capture order (the first report throws). Does nothing when every index was in range.
  void throw_first_failure() const;
  std::size_t size() const { return checks_.size(); }
  // Drops every check (a probe capture's, before the capture that will be replayed); the room stays.
  void clear() { checks_.clear(); }

 private:
  struct Check {
    memory::ScopedBlock device_scratch;
    std::int64_t* verdict;
    OutOfRangeReport report;
  };
  memory::ScopedBlock room_;
  std::size_t capacity_ = 0;
  std::vector<Check> checks_;
};

// The checks collecting this thread's captures (null: none).
CapturedIndexChecks* captured_index_checks();

// Installs `checks` for this thread for the scope's lifetime (the previous one comes back after).
class CapturedIndexChecksScope {
 public:
  explicit CapturedIndexChecksScope(CapturedIndexChecks& checks);
  ~CapturedIndexChecksScope();
  CapturedIndexChecksScope(const CapturedIndexChecksScope&) = delete;
  CapturedIndexChecksScope& operator=(const CapturedIndexChecksScope&) = delete;

 private:
  CapturedIndexChecks* previous_;
};

}  // namespace sublet::ops
