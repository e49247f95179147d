#pragma once
// Shared helpers for allocator tests: a CachingAllocator over a SimulatedBackend the test can
// steer, and readers for the statistics the tests assert on.
#include <memory>
#include <string>

#include "memory/block_pool.h"  // tests read block->pool
#include "memory/caching_allocator.h"
#include "memory/simulated_backend.h"

namespace sublet::memory::testing {

struct SimulatedAllocator {
  explicit SimulatedAllocator(std::size_t capacity, const std::string& conf = "")
      : backend(new SimulatedBackend(capacity)),
        allocator(std::unique_ptr<Backend>(backend), AllocatorConfig::parse(conf)) {}
  SimulatedBackend* backend;  // owned by the allocator
  CachingAllocator allocator;

  std::int64_t stat(const std::string& key) const { return allocator.memory_stats().at(key); }
};

inline void* address_of(const Block* b) { return b->ptr; }
inline char* at(const Block* b) { return static_cast<char*>(b->ptr); }

}  // namespace sublet::memory::testing
