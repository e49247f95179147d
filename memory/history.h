#pragma once
// A bounded ring of allocator events (alloc, free requested/completed, segment alloc/free,
// map/unmap, OOM) with time, address, sizes, stream, category and the scope that asked.
// Attach it to an allocator to record; the oldest events are dropped when the ring is full
// (dropped() says how many). Replaying events() through another allocator answers what-if
// questions (see analysis/replay.h).
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "memory/caching_allocator.h"

namespace sublet::memory {

struct HistoryEvent {
  AllocatorEventKind kind;
  std::int64_t time_ns;  // since the history was created
  std::uintptr_t address;
  std::size_t size;
  std::size_t requested_size;
  StreamHandle stream;
  BlockCategory category;
  std::uint32_t annotation;
};

const char* event_kind_name(AllocatorEventKind kind);
const char* category_name(BlockCategory category);
// The category category_name() names; nullopt for any other text.
std::optional<BlockCategory> category_from_name(std::string_view name);

class AllocationHistory {
 public:
  explicit AllocationHistory(std::size_t capacity = std::size_t{1} << 20);
  ~AllocationHistory();
  AllocationHistory(const AllocationHistory&) = delete;
  AllocationHistory& operator=(const AllocationHistory&) = delete;

  // Records every event of `allocator` until detach() or destruction. One allocator at a time.
  void attach(CachingAllocator& allocator);
  void detach();

  std::vector<HistoryEvent> events() const;  // oldest first
  std::size_t dropped() const;
  void clear();
  void record(const AllocatorEvent& event);

 private:
  mutable std::mutex mutex_;
  std::vector<HistoryEvent> ring_;
  std::size_t capacity_;
  std::size_t next_ = 0;     // write position once the ring is full
  std::size_t dropped_ = 0;
  CachingAllocator* attached_ = nullptr;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace sublet::memory
