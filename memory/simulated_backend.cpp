#include "memory/simulated_backend.h"

#include <cstdint>
#include <iterator>

#include "core/errors.h"

namespace sublet::memory {
namespace {
// Fake addresses start high and far from zero so that they never look like real host pointers.
constexpr std::uintptr_t kAddressBase = std::uintptr_t{0x7e00} << 32;

// Address ranges are cut in multiples of the alignment a backend promises, so that every
// allocation starts aligned whatever sizes came before it (the allocator's requests, whole
// segments, always are multiples; direct callers need not be).
// A size too large to round fits nowhere: SIZE_MAX keeps it that way instead of wrapping to 0.
std::size_t aligned_range(std::size_t bytes) {
  if (bytes > SIZE_MAX - (kBackendAlignment - 1)) return SIZE_MAX;
  return (bytes + kBackendAlignment - 1) / kBackendAlignment * kBackendAlignment;
}
}  // namespace

SimulatedBackend::SimulatedBackend(std::size_t capacity_bytes, Device device)
    : capacity_(capacity_bytes), device_(device) {
  // The fake address space is far larger than the capacity so that reserved virtual ranges
  // (expandable segments) and fragmentation never run out of addresses before bytes.
  free_ranges_[kAddressBase] = std::size_t{1} << 46;
}

std::uintptr_t SimulatedBackend::take_address_range(std::size_t bytes) {
  for (auto it = free_ranges_.begin(); it != free_ranges_.end(); ++it) {
    if (it->second < bytes) continue;
    const std::uintptr_t address = it->first;
    const std::size_t rest = it->second - bytes;
    free_ranges_.erase(it);
    if (rest > 0) free_ranges_[address + bytes] = rest;
    return address;
  }
  return 0;
}

void SimulatedBackend::return_address_range(std::uintptr_t address, std::size_t bytes) {
  auto [it, inserted] = free_ranges_.emplace(address, bytes);
  if (!inserted) throw Error("SimulatedBackend: address range returned twice");
  auto next = std::next(it);
  if (next != free_ranges_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_ranges_.erase(next);
  }
  if (it != free_ranges_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_ranges_.erase(it);
    }
  }
}

bool SimulatedBackend::should_fail_request() {
  ++allocate_calls_;
  if (fail_all_) return true;
  if (fail_at_call_ != 0 && allocate_calls_ == fail_at_call_) return true;
  return false;
}

void* SimulatedBackend::allocate(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (should_fail_request() || bytes > capacity_ - used_) return nullptr;
  const std::uintptr_t address = take_address_range(aligned_range(bytes));
  if (address == 0) return nullptr;
  used_ += bytes;
  live_allocations_[address] = bytes;
  return reinterpret_cast<void*>(address);
}

void SimulatedBackend::deallocate(void* ptr, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  auto it = live_allocations_.find(address);
  if (it == live_allocations_.end() || it->second != bytes)
    throw Error("SimulatedBackend::deallocate: no live allocation of " + std::to_string(bytes) + " bytes at this address");
  live_allocations_.erase(it);
  ++free_calls_;
  used_ -= bytes;
  return_address_range(address, aligned_range(bytes));
}

MemoryInfo SimulatedBackend::memory_info() const {
  std::lock_guard lock(mutex_);
  return MemoryInfo{capacity_ - used_, capacity_};
}

void* SimulatedBackend::reserve(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  return reinterpret_cast<void*>(take_address_range(aligned_range(bytes)));
}

void SimulatedBackend::release(void* base, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  return_address_range(reinterpret_cast<std::uintptr_t>(base), aligned_range(bytes));
}

bool SimulatedBackend::map(void* /*address*/, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes % kGranularity != 0) throw Error("SimulatedBackend::map: size is not a multiple of the granularity");
  if (should_fail_request() || bytes > capacity_ - used_) return false;
  used_ += bytes;
  return true;
}

void SimulatedBackend::unmap(void* /*address*/, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  ++free_calls_;
  used_ -= bytes;
}

EventHandle SimulatedBackend::record(StreamHandle stream) {
  std::lock_guard lock(mutex_);
  const std::uintptr_t id = next_event_++;
  pending_events_[id] = stream;
  return reinterpret_cast<EventHandle>(id);
}

bool SimulatedBackend::completed(EventHandle event) {
  std::lock_guard lock(mutex_);
  return pending_events_.count(reinterpret_cast<std::uintptr_t>(event)) == 0;
}

void SimulatedBackend::destroy(EventHandle event) {
  std::lock_guard lock(mutex_);
  pending_events_.erase(reinterpret_cast<std::uintptr_t>(event));
}

void SimulatedBackend::synchronize_device() {
  std::lock_guard lock(mutex_);
  ++synchronize_calls_;
  pending_events_.clear();
}

void SimulatedBackend::make_stream_wait(StreamHandle stream, EventHandle event) {
  std::lock_guard lock(mutex_);
  auto it = pending_events_.find(reinterpret_cast<std::uintptr_t>(event));
  if (it == pending_events_.end()) throw Error("SimulatedBackend::make_stream_wait: unknown or destroyed event");
  stream_waits_.emplace_back(stream, it->second);
}

std::vector<std::pair<StreamHandle, StreamHandle>> SimulatedBackend::stream_waits() const {
  std::lock_guard lock(mutex_);
  return stream_waits_;
}

std::uint64_t SimulatedBackend::synchronize_calls() const {
  std::lock_guard lock(mutex_);
  return synchronize_calls_;
}

void SimulatedBackend::complete_stream_work(StreamHandle stream) {
  std::lock_guard lock(mutex_);
  std::erase_if(pending_events_, [&](const auto& entry) { return entry.second == stream; });
}

void SimulatedBackend::fail_nth_request(std::uint64_t n) {
  std::lock_guard lock(mutex_);
  fail_at_call_ = n == 0 ? 0 : allocate_calls_ + n;
}

std::uint64_t SimulatedBackend::allocate_calls() const { std::lock_guard lock(mutex_); return allocate_calls_; }
std::uint64_t SimulatedBackend::free_calls() const { std::lock_guard lock(mutex_); return free_calls_; }
std::size_t SimulatedBackend::used_bytes() const { std::lock_guard lock(mutex_); return used_; }

}  // namespace sublet::memory
