// Where data parallel loads NCCL from (runtime/distributed/nccl_library.h): the runtime switch
// TuningOptions::nccl_library (SUBLET_NCCL_LIBRARY), by default libnccl.so.2 on the loader's path.
// Each state is checked through nccl() in a fresh process (ctest runs each case alone, and
// nccl() keeps the first library it loads); the default one needs a GPU.
#include <gtest/gtest.h>

#include <string>

#include "core/errors.h"
#include "core/tuning.h"
#include "runtime/distributed/nccl_library.h"
#include "tests/gpu_skip.h"
#include "tests/throw_message.h"

namespace sublet::distributed {
namespace {

constexpr const char* kMissing = "/nonexistent/sublet-test/libnccl-missing.so";

TEST(NcclLibrary, LoadsTheLibraryTheSwitchNames) {
  const ScopedTuning missing([](TuningOptions& o) { o.nccl_library = kMissing; });
  const std::string message = testing::message_of<DistributedError>([] { nccl(); });
  EXPECT_NE(message.find(kMissing), std::string::npos) << message;
  EXPECT_NE(message.find("SUBLET_NCCL_LIBRARY"), std::string::npos) << "says how to point sublet elsewhere: " << message;
}

// A failed load is not remembered: every call tries again and says why, in the same process (a
// library installed or a switch changed meanwhile takes effect), and none of them crashes.
TEST(NcclLibrary, AFailedLoadFailsAgainOnTheNextCall) {
  const ScopedTuning missing([](TuningOptions& o) { o.nccl_library = kMissing; });
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string message = testing::message_of<DistributedError>([] { nccl(); });
    EXPECT_NE(message.find(kMissing), std::string::npos) << "attempt " << attempt << ": " << message;
  }
}

// Loading a real NCCL needs a CUDA driver (NCCL's own calls fail without one), hence a GPU.
TEST(NcclLibrary, LoadsLibncclByDefault) {
  ASSERT_EQ(TuningOptions{}.nccl_library, "libnccl.so.2");
  SUBLET_SKIP_WITHOUT_GPU("loading the loader's libnccl.so.2 by default");
  const ScopedTuning by_default([](TuningOptions& o) { o.nccl_library = TuningOptions{}.nccl_library; });
  EXPECT_EQ(nccl().path, "libnccl.so.2");
  EXPECT_GE(nccl().version, 21000);
}

TEST(NcclLibrary, LoadNcclRefusesAMissingFile) {
  const std::string message = testing::message_of<DistributedError>([] { load_nccl(kMissing); });
  EXPECT_NE(message.find(kMissing), std::string::npos) << message;
}

}  // namespace
}  // namespace sublet::distributed
