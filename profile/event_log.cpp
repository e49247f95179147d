#include "profile/event_log.h"

#include "core/errors.h"

namespace sublet::profile {

EventLog::EventLog(memory::CachingAllocator& allocator, std::size_t capacity)
    : allocator_(allocator), history_(capacity), start_(std::chrono::steady_clock::now()) {
  // The baseline and the observer must see the same state: nothing may allocate in between, which
  // holds because profiling runs on the thread that would allocate.
  baseline_.allocated = allocator.memory_allocated();
  baseline_.reserved = allocator.memory_reserved();
  baseline_.segments = allocator.snapshot();
  allocator.set_observer([this](const memory::AllocatorEvent& e) {
    history_.record(e);
    count_.fetch_add(1, std::memory_order_release);
  });
  recording_ = true;
}

EventLog::~EventLog() { stop(); }

void EventLog::stop() {
  if (!recording_) return;
  allocator_.set_observer(nullptr);
  recording_ = false;
}

std::vector<memory::HistoryEvent> EventLog::events() const {
  if (history_.dropped() != 0) {
    throw Error("profile: the allocation history overflowed (" + std::to_string(history_.dropped()) +
                " events dropped); profile fewer steps or a smaller batch");
  }
  return history_.events();
}

}  // namespace sublet::profile
