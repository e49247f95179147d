// replace_allocator retires the old allocator instead of destroying it: lookups are lock-free, so
// a reference taken before the swap must stay valid, and the retired allocator gives back its
// memory.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/errors.h"
#include "memory/registry.h"
#include "memory/simulated_backend.h"

using namespace sublet::memory;
using sublet::Device;

TEST(AllocatorRegistry, AnAllocatorReplacedWhileReferencedStaysUsableAndHoldsNoMemory) {
  auto* backend = new SimulatedBackend(std::size_t{1} << 30, Device::cpu());
  auto first = std::make_unique<CachingAllocator>(std::unique_ptr<Backend>(backend), AllocatorConfig{});
  // The observer shares `alive` and records events: destroying the allocator would destroy the
  // observer and drop its share of `alive`.
  auto alive = std::make_shared<std::vector<AllocatorEventKind>>();
  first->set_observer([alive](const AllocatorEvent& e) { alive->push_back(e.kind); });
  replace_allocator(Device::cpu(), std::move(first));

  CachingAllocator& before = allocator_for(Device::cpu());  // as a lock-free reader holds it
  before.free(before.allocate(3 * kMiB));                    // leaves a cached segment
  ASSERT_GT(before.memory_reserved(), 0u);
  ASSERT_GT(backend->used_bytes(), 0u);

  replace_allocator(Device::cpu(), make_allocator(Device::cpu(), AllocatorKind::Caching));
  EXPECT_NE(&allocator_for(Device::cpu()), &before);
  // Fatal: reading a destroyed allocator below would be undefined behaviour.
  ASSERT_EQ(alive.use_count(), 2) << "the replaced allocator (and its observer) was destroyed";
  // Still readable, and its cache went back to the backend before it was retired.
  EXPECT_EQ(before.memory_reserved(), 0u);
  EXPECT_EQ(before.memory_allocated(), 0u);
  EXPECT_EQ(backend->used_bytes(), 0u);
  EXPECT_EQ(before.stats().num_device_free, 1);
  ASSERT_FALSE(alive->empty());
  EXPECT_EQ(alive->back(), AllocatorEventKind::SegmentFree);
}

TEST(AllocatorRegistry, ReplacingWhileBlocksAreLiveThrowsAndKeepsTheAllocator) {
  CachingAllocator& current = allocator_for(Device::cpu());
  Block* live = current.allocate(kMiB);
  EXPECT_THROW(replace_allocator(Device::cpu(), make_allocator(Device::cpu(), AllocatorKind::Raw)), sublet::Error);
  EXPECT_EQ(&allocator_for(Device::cpu()), &current);
  current.free(live);
}
