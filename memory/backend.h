#pragma once
// The landlord: the only layer that talks to a driver. A Backend hands out whole segments;
// the CachingAllocator cuts them into blocks. Two optional capabilities are separate small
// interfaces so that a backend implements only what it can: VirtualMemory (expandable
// segments) and StreamEvents (stream-ordered reuse after record_stream).
#include <cstddef>
#include <string>

#include "core/device.h"

namespace sublet::memory {

struct MemoryInfo {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
};

// Reserve an address range once, then back it with physical memory piece by piece.
// All sizes and offsets are multiples of granularity().
class VirtualMemory {
 public:
  virtual ~VirtualMemory() = default;
  virtual std::size_t granularity() const = 0;
  // nullptr when no address range of that size can be reserved.
  virtual void* reserve(std::size_t bytes) = 0;
  virtual void release(void* base, std::size_t bytes) = 0;
  // false when the device has no physical memory left; never throws for that case.
  virtual bool map(void* address, std::size_t bytes) = 0;
  virtual void unmap(void* address, std::size_t bytes) = 0;
};

using EventHandle = void*;

// Events let a block used on another stream wait until that stream's work is done.
class StreamEvents {
 public:
  virtual ~StreamEvents() = default;
  virtual EventHandle record(StreamHandle stream) = 0;
  virtual bool completed(EventHandle event) = 0;
  virtual void destroy(EventHandle event) = 0;
  // Waits for all work on all streams of the device.
  virtual void synchronize_device() = 0;
  // Stream-ordered reuse (as cudaMallocAsync across streams): true when the backend can make a
  // stream wait on an event on the device, with no host wait. The allocator then hands a block
  // freed under another stream's pending use to its own stream at once, with that wait enqueued
  // first, instead of holding it back until the event has completed.
  virtual bool can_make_stream_wait() const { return false; }
  // Work enqueued on `stream` after this call runs after the work recorded before `event`.
  virtual void make_stream_wait(StreamHandle stream, EventHandle event);
};

// What every allocation of a backend is aligned to at least (cudaMalloc's guarantee).
inline constexpr std::size_t kBackendAlignment = 256;

// The contract every backend meets (tests/memory/test_backend_conformance.cpp checks it for each):
//  - allocate(bytes > 0) returns at least `bytes` bytes aligned to kBackendAlignment, not
//    overlapping any other live allocation of the backend; memory the process can touch where the
//    backend gives real memory (host, pinned) — device memory and fake addresses are not;
//  - a request the device cannot serve (more than its capacity, or no address space for it)
//    returns nullptr, never throws and never aborts: out-of-memory is the allocator's to report.
//    Exceptions (CudaError, Error) are for a broken driver or a misuse;
//  - deallocate(ptr, bytes) takes exactly what one allocate returned, with the same bytes;
//  - name() names the backend (the summary prints it), device() is where the bytes live.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* ptr, std::size_t bytes) = 0;
  virtual MemoryInfo memory_info() const = 0;
  // Capabilities; nullptr when not supported.
  virtual VirtualMemory* virtual_memory() { return nullptr; }
  virtual StreamEvents* stream_events() { return nullptr; }
};

}  // namespace sublet::memory
