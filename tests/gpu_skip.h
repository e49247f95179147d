#pragma once
// How a GPU test steps aside where there is no GPU, said one way everywhere. With
// SUBLET_REQUIRE_GPU=1 (the GPU check scripts set it) a missing GPU fails the test instead: a GPU
// host whose driver broke would otherwise report every GPU test as skipped and the run as green.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string_view>

#include "memory/registry.h"
#include "tests/gpu_skip.h"

namespace sublet::testing {

inline bool gpu_required() {
  const char* value = std::getenv("SUBLET_REQUIRE_GPU");
  return value != nullptr && std::string_view(value) == "1";
}

}  // namespace sublet::testing

// In a TEST body: skips (or, under SUBLET_REQUIRE_GPU=1, fails) when no CUDA device is usable.
// `what` says what the test would have checked.
#define SUBLET_SKIP_WITHOUT_GPU(what)                                                                \
  do {                                                                                               \
    if (!::sublet::memory::cuda_available()) {                                                       \
      if (::sublet::testing::gpu_required()) {                                                       \
        FAIL() << "SUBLET_REQUIRE_GPU=1, but no CUDA device is available: " << what;                 \
      }                                                                                              \
      GTEST_SKIP() << "no CUDA device: " << what;                                                    \
    }                                                                                                \
  } while (false)
