#pragma once
// Builds the OutOfMemoryError text: the numbers a user needs to see why the request failed,
// and advice that fits the situation (never a setting that is already on).
#include <cstddef>
#include <string>

#include "memory/backend.h"
#include "memory/config.h"
#include "memory/waste.h"

namespace sublet::memory {

struct OomFacts {
  Device device;
  std::size_t requested_bytes = 0;
  MemoryInfo device_info;
  std::size_t allocated_bytes = 0;
  std::size_t reserved_bytes = 0;
  std::size_t largest_free_block = 0;
  double fragmentation = 0.0;   // share of free reserved memory outside the largest free block
  std::size_t memory_limit = 0; // 0 = no per-process fraction
  AllocatorConfig config;
  WasteSplit waste;             // at the failure, after the cache was released
};

std::string describe_out_of_memory(const OomFacts& facts);

}  // namespace sublet::memory
