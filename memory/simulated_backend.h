#pragma once
// A fake device of a set capacity: hands out addresses from a fake address space, never touches
// memory, counts calls, and can be told to fail the n-th allocation request. Makes OOM,
// fragmentation and retry paths deterministic, and lets users ask what-if questions on a laptop.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "memory/backend.h"

namespace sublet::memory {

class SimulatedBackend final : public Backend, public VirtualMemory, public StreamEvents {
 public:
  explicit SimulatedBackend(std::size_t capacity_bytes, Device device = Device::cuda(0));

  std::string name() const override { return "simulated"; }
  Device device() const override { return device_; }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  MemoryInfo memory_info() const override;
  VirtualMemory* virtual_memory() override { return this; }
  StreamEvents* stream_events() override { return this; }

  // VirtualMemory: map/unmap count against the capacity like allocate/deallocate.
  std::size_t granularity() const override { return kGranularity; }
  void* reserve(std::size_t bytes) override;
  void release(void* base, std::size_t bytes) override;
  bool map(void* address, std::size_t bytes) override;
  void unmap(void* address, std::size_t bytes) override;

  // StreamEvents: an event completes only when the test says the stream's work is done.
  EventHandle record(StreamHandle stream) override;
  bool completed(EventHandle event) override;
  void destroy(EventHandle event) override;
  void synchronize_device() override;
  void complete_stream_work(StreamHandle stream);
  // Stream-ordered reuse is off by default (the deferred path, as PyTorch's allocator); a test
  // turns it on to see the allocator's side of it. A wait is only recorded: (waiting stream,
  // the stream whose event it waits on).
  void enable_stream_waits(bool on) { std::lock_guard lock(mutex_); stream_waits_enabled_ = on; }
  bool can_make_stream_wait() const override { std::lock_guard lock(mutex_); return stream_waits_enabled_; }
  void make_stream_wait(StreamHandle stream, EventHandle event) override;
  std::vector<std::pair<StreamHandle, StreamHandle>> stream_waits() const;
  std::uint64_t synchronize_calls() const;

  // The n-th physical request from now (allocate or map; 1 = the next one) fails. 0 = never.
  void fail_nth_request(std::uint64_t n);
  // Every physical request fails while set (a device that is full to someone else).
  void set_fail_all(bool fail) { std::lock_guard lock(mutex_); fail_all_ = fail; }

  std::uint64_t allocate_calls() const;  // allocate + map calls, failed ones included
  std::uint64_t free_calls() const;      // deallocate + unmap calls
  std::size_t used_bytes() const;

  static constexpr std::size_t kGranularity = 2 * 1024 * 1024;

 private:
  std::uintptr_t take_address_range(std::size_t bytes);
  void return_address_range(std::uintptr_t address, std::size_t bytes);
  bool should_fail_request();

  mutable std::mutex mutex_;
  const std::size_t capacity_;
  const Device device_;
  std::size_t used_ = 0;
  std::uint64_t allocate_calls_ = 0;
  std::uint64_t free_calls_ = 0;
  std::uint64_t fail_at_call_ = 0;  // absolute call number that fails; 0 = none
  bool fail_all_ = false;
  std::map<std::uintptr_t, std::size_t> free_ranges_;  // fake address space, first fit
  std::map<std::uintptr_t, std::size_t> live_allocations_;
  std::uintptr_t next_event_ = 1;
  std::map<std::uintptr_t, StreamHandle> pending_events_;
  bool stream_waits_enabled_ = false;
  std::vector<std::pair<StreamHandle, StreamHandle>> stream_waits_;
  std::uint64_t synchronize_calls_ = 0;
};

}  // namespace sublet::memory
