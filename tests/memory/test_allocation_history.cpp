// The allocation history records every event in order, with the scope that asked.
#include <gtest/gtest.h>

#include "alloc_test_support.h"
#include "memory/annotation.h"
#include "memory/history.h"

using namespace sublet::memory;
using sublet::memory::testing::SimulatedAllocator;

TEST(AllocationHistory, RecordsEventsInOrderWithScopesAndCategories) {
  SimulatedAllocator a(1024 * kMiB);
  AllocationHistory history;
  history.attach(a.allocator);
  Block* weight = nullptr;
  {
    AnnotationScope scope("conv1/forward");
    weight = a.allocator.allocate(3 * kMiB, nullptr, BlockCategory::Parameter);
  }
  a.allocator.free(weight);
  a.allocator.empty_cache();
  const auto events = history.events();
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[0].kind, AllocatorEventKind::SegmentAlloc);
  EXPECT_EQ(events[0].size, 20 * kMiB);
  EXPECT_EQ(events[1].kind, AllocatorEventKind::Alloc);
  EXPECT_EQ(events[1].size, 3 * kMiB);
  EXPECT_EQ(events[1].requested_size, 3 * kMiB);
  EXPECT_EQ(events[1].category, BlockCategory::Parameter);
  EXPECT_EQ(annotation_name(events[1].annotation), "conv1/forward");
  EXPECT_EQ(events[2].kind, AllocatorEventKind::FreeRequested);
  EXPECT_EQ(events[3].kind, AllocatorEventKind::FreeCompleted);
  EXPECT_EQ(events[4].kind, AllocatorEventKind::CacheEmptied);  // the call, then what it released
  EXPECT_EQ(events[5].kind, AllocatorEventKind::SegmentFree);
  for (std::size_t i = 1; i < events.size(); ++i) EXPECT_GE(events[i].time_ns, events[i - 1].time_ns);
  EXPECT_EQ(current_annotation(), 0u);  // the scope ended
}

TEST(AllocationHistory, RingKeepsTheNewestEvents) {
  SimulatedAllocator a(1024 * kMiB);
  AllocationHistory history(4);
  history.attach(a.allocator);
  for (int i = 0; i < 5; ++i) a.allocator.free(a.allocator.allocate(1000 + static_cast<std::size_t>(i) * 512));
  const auto events = history.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(history.dropped(), 12u);  // 16 events: one segment, then 5 x (alloc, free requested, free completed)
  EXPECT_EQ(events.back().kind, AllocatorEventKind::FreeCompleted);
  EXPECT_EQ(events[1].kind, AllocatorEventKind::Alloc);
  EXPECT_EQ(events[1].requested_size, 1000u + 4 * 512);
}

TEST(AllocationHistory, DetachStopsRecording) {
  SimulatedAllocator a(1024 * kMiB);
  AllocationHistory history;
  history.attach(a.allocator);
  a.allocator.free(a.allocator.allocate(kMiB));
  history.detach();
  const std::size_t recorded = history.events().size();
  a.allocator.free(a.allocator.allocate(kMiB));
  EXPECT_EQ(history.events().size(), recorded);
}

TEST(AllocationHistory, NestedScopesRestoreTheOuterOne) {
  AnnotationScope outer("step");
  {
    AnnotationScope inner("layer1");
    EXPECT_EQ(annotation_name(current_annotation()), "layer1");
  }
  EXPECT_EQ(annotation_name(current_annotation()), "step");
  EXPECT_EQ(intern_annotation("step"), outer.id());
}
