#pragma once
// A decorator around any Backend (in practice HostBackend: real memory, so that a real training
// step can run on it) that fails chosen physical requests: the n-th allocate or map call, as
// SimulatedBackend::fail_nth_request, with the same counting. Everything else is forwarded.
//
// Two kinds of fault:
//  - Once: only the n-th request fails (a transient refusal); the allocator's retry succeeds.
//  - DeviceFull: the n-th request finds the device full: it fails, and from then on the device
//    holds no more than the bytes the wrapped backend held at that moment, so a later request
//    (the allocator's retry included) succeeds only within what has been given back since.
//    This is a device that someone else filled up: the retry after freeing the cache recovers
//    exactly when the cache held enough.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "memory/backend.h"

namespace sublet::memory {

class FaultInjectingBackend final : public Backend, public VirtualMemory {
 public:
  enum class Fault { Once, DeviceFull };

  explicit FaultInjectingBackend(std::unique_ptr<Backend> wrapped);

  std::string name() const override { return "fault-injecting(" + wrapped_->name() + ")"; }
  Device device() const override { return wrapped_->device(); }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  // The wrapped backend's, with free bytes capped while the device is full.
  MemoryInfo memory_info() const override;
  // Offered only when the wrapped backend has it; map counts as a physical request.
  VirtualMemory* virtual_memory() override { return wrapped_->virtual_memory() ? this : nullptr; }
  // Events make no physical request: forwarded as they are.
  StreamEvents* stream_events() override { return wrapped_->stream_events(); }

  std::size_t granularity() const override { return wrapped_->virtual_memory()->granularity(); }
  void* reserve(std::size_t bytes) override { return wrapped_->virtual_memory()->reserve(bytes); }
  void release(void* base, std::size_t bytes) override { wrapped_->virtual_memory()->release(base, bytes); }
  bool map(void* address, std::size_t bytes) override;
  void unmap(void* address, std::size_t bytes) override;

  // The n-th physical request from now (allocate or map; 1 = the next one) fails. 0 = never.
  // Each call replaces the previous plan and ends a DeviceFull state (the device is free again).
  void fail_nth_request(std::uint64_t n, Fault fault = Fault::Once);

  std::uint64_t allocate_calls() const;  // allocate + map calls, failed ones included
  std::uint64_t failed_calls() const;    // requests this backend refused (not the wrapped one's own failures)
  std::size_t held_bytes() const;        // allocated + mapped through this backend, not yet given back
  // The largest request (allocate or map, refused ones included) since construction or the last
  // reset_largest_request().
  std::size_t largest_request() const;
  void reset_largest_request();

 private:
  // Counts the request; true when it must fail. Called with mutex_ held.
  bool should_fail_request(std::size_t bytes);

  const std::unique_ptr<Backend> wrapped_;
  mutable std::mutex mutex_;
  std::uint64_t allocate_calls_ = 0;
  std::uint64_t failed_calls_ = 0;
  std::uint64_t fail_at_call_ = 0;  // absolute call number that fails; 0 = none
  Fault fault_ = Fault::Once;
  bool full_ = false;               // DeviceFull has struck: held_ may not grow past capacity_
  std::size_t capacity_ = 0;
  std::size_t held_ = 0;
  std::size_t largest_request_ = 0;
};

}  // namespace sublet::memory
