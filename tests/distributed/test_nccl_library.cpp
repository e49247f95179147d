// Where data parallel loads NCCL from (runtime/distributed/nccl_library.h): the runtime switch
// TuningOptions::nccl_library (SUBLET_NCCL_LIBRARY), by default libnccl.so.2 on the loader's path.
// Each state is checked through nccl() in a fresh process (ctest runs each case alone, and
// nccl() keeps the first library it loads).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "core/errors.h"
#include "core/tuning.h"
#include "runtime/distributed/nccl_library.h"
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

bool libnccl_on_loader_path() {
  void* handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) dlclose(handle);
  return handle != nullptr;
}

// Loading NCCL and asking its version need no GPU, so this runs wherever the loader finds a
// libnccl.so.2 (the CUDA toolkit's, a PyTorch environment's). Every slot must be bound: a slot left
// null crashes the first collective that calls it.
TEST(NcclLibrary, LoadsLibncclByDefaultWithEveryFunctionBound) {
  ASSERT_EQ(TuningOptions{}.nccl_library, "libnccl.so.2");
  if (!libnccl_on_loader_path()) GTEST_SKIP() << "no libnccl.so.2 on the loader's path";
  const ScopedTuning by_default([](TuningOptions& o) { o.nccl_library = TuningOptions{}.nccl_library; });
  const NcclLibrary& lib = nccl();
  EXPECT_EQ(lib.path, "libnccl.so.2");
  EXPECT_GE(lib.version, 21000);
  EXPECT_NE(lib.get_version, nullptr);
  EXPECT_NE(lib.get_unique_id, nullptr);
  EXPECT_NE(lib.comm_init_rank, nullptr);
  EXPECT_NE(lib.comm_destroy, nullptr);
  EXPECT_NE(lib.comm_abort, nullptr);
  EXPECT_NE(lib.comm_get_async_error, nullptr);
  EXPECT_NE(lib.get_error_string, nullptr);
  EXPECT_NE(lib.all_reduce, nullptr);
  EXPECT_NE(lib.broadcast, nullptr);
  EXPECT_NE(lib.group_start, nullptr);
  EXPECT_NE(lib.group_end, nullptr);
  ncclUniqueId id{};
  EXPECT_EQ(lib.get_unique_id(&id), ncclSuccess);
}

TEST(NcclLibrary, LoadNcclRefusesAMissingFile) {
  const std::string message = testing::message_of<DistributedError>([] { load_nccl(kMissing); });
  EXPECT_NE(message.find(kMissing), std::string::npos) << message;
}

}  // namespace
}  // namespace sublet::distributed
