#pragma once
// Checks that the allocator's statistics agree with its actual segments and blocks.
#include <gtest/gtest.h>

#include "memory/caching_allocator.h"

namespace sublet::memory::testing {

inline void expect_consistent(const CachingAllocator& allocator) {
  const auto segments = allocator.snapshot();
  const DeviceStats stats = allocator.stats();
  std::int64_t reserved = 0, allocated = 0, allocations = 0, inactive_split = 0;
  for (const SegmentInfo& segment : segments) {
    std::size_t covered = 0;
    std::uintptr_t expected_address = segment.address;
    const BlockInfo* previous = nullptr;
    for (const BlockInfo& block : segment.blocks) {
      EXPECT_EQ(block.address, expected_address) << "blocks of a segment must tile it without gaps";
      expected_address += block.size;
      covered += block.size;
      if (block.state == BlockInfo::State::ActiveAllocated) {
        allocated += static_cast<std::int64_t>(block.size);
        ++allocations;
      }
      const bool free_now = block.state == BlockInfo::State::Inactive;
      if (previous) {
        EXPECT_FALSE(free_now && previous->state == BlockInfo::State::Inactive) << "free neighbours not coalesced";
      }
      if (free_now && segment.blocks.size() > 1 && !segment.is_expandable) ++inactive_split;
      previous = &block;
    }
    EXPECT_EQ(covered, segment.total_size);
    reserved += static_cast<std::int64_t>(segment.total_size);
  }
  EXPECT_EQ(stats.reserved_bytes[StatType::All].current, reserved);
  EXPECT_EQ(stats.allocated_bytes[StatType::All].current, allocated);
  EXPECT_EQ(stats.allocation[StatType::All].current, allocations);
  EXPECT_EQ(stats.inactive_split[StatType::All].current, inactive_split);
}

}  // namespace sublet::memory::testing
