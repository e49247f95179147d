// SUBLET_DEBUG_ASSERT (core/debug_assert.h) checks the allocator's internal invariants in debug
// builds and costs nothing in release builds. This file is compiled with the same NDEBUG setting
// as the memory library, so each test checks the behaviour of the build it runs in:
//   Debug (no NDEBUG): a violated invariant aborts with its message;
//   Release (NDEBUG):  the condition is not even evaluated.
#include <gtest/gtest.h>

#include "alloc_test_support.h"
#include "core/debug_assert.h"

using namespace sublet::memory;
using sublet::memory::testing::SimulatedAllocator;

namespace {
[[maybe_unused]] bool count_evaluation(int& evaluations) {
  ++evaluations;
  return false;
}
}  // namespace

TEST(DebugAssert, FiresOnlyInDebugBuilds) {
  int evaluations = 0;
#ifdef NDEBUG
  SUBLET_DEBUG_ASSERT(count_evaluation(evaluations), "never evaluated with NDEBUG");
  EXPECT_EQ(evaluations, 0);
#else
  SUBLET_DEBUG_ASSERT(!count_evaluation(evaluations), "a holding condition passes");
  EXPECT_EQ(evaluations, 1);
  EXPECT_DEATH(SUBLET_DEBUG_ASSERT(1 + 1 == 3, "arithmetic holds"),
               "internal invariant violated: arithmetic holds \\(1 \\+ 1 == 3\\)");
#endif
}

TEST(AllocatorDebugChecks, FreeingAnotherAllocatorsBlockAborts) {
#ifdef NDEBUG
  GTEST_SKIP() << "release build: the allocator's debug checks are compiled out";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  SimulatedAllocator owner(std::size_t{1} << 30);
  SimulatedAllocator stranger(std::size_t{1} << 30);
  Block* b = owner.allocator.allocate(4096);
  EXPECT_DEATH(stranger.allocator.free(b), "a freed block belongs to one of this allocator's pools");
  owner.allocator.free(b);
#endif
}

TEST(AllocatorDebugChecks, ACorruptedNeighbourIsCaughtWhenMerging) {
#ifdef NDEBUG
  GTEST_SKIP() << "release build: the allocator's debug checks are compiled out";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  SimulatedAllocator a(std::size_t{1} << 30);
  Block* lower = a.allocator.allocate(4096);
  Block* upper = a.allocator.allocate(4096);  // the next block of the same small segment
  ASSERT_EQ(lower->next, upper);
  a.allocator.free(upper);                    // upper is now free and cached
  EXPECT_DEATH(
      {
        upper->ptr = static_cast<char*>(upper->ptr) + 512;  // a gap: a bookkeeping bug
        a.allocator.free(lower);
      },
      "merged neighbours are contiguous");
  a.allocator.free(lower);
#endif
}
