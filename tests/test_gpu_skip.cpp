// The one way GPU tests step aside (tests/gpu_skip.h): a skip where there is no GPU, a failure
// instead under SUBLET_REQUIRE_GPU=1, and nothing at all where a GPU is present.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/gpu_skip.h"

namespace {

void needs_a_gpu() { SUBLET_SKIP_WITHOUT_GPU("the macro under test"); }

TEST(GpuSkip, RequiredGpuMissingIsAFailure) {
  if (sublet::memory::cuda_available()) GTEST_SKIP() << "a CUDA device is present: the macro lets the test run";
  setenv("SUBLET_REQUIRE_GPU", "1", 1);
  EXPECT_FATAL_FAILURE(needs_a_gpu(), "SUBLET_REQUIRE_GPU=1, but no CUDA device is available: the macro under test");
  unsetenv("SUBLET_REQUIRE_GPU");
}

TEST(GpuSkip, OtherwiseAMissingGpuSkips) {
  unsetenv("SUBLET_REQUIRE_GPU");
  needs_a_gpu();
  if (sublet::memory::cuda_available()) {
    EXPECT_FALSE(::testing::Test::IsSkipped());
  } else {
    EXPECT_TRUE(::testing::Test::IsSkipped());
  }
}

}  // namespace
