// CPU memory goes through the same caching allocator: usable, aligned, and visible in stats.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "core/errors.h"
#include "memory/host_backend.h"
#include "memory/registry.h"

using namespace sublet::memory;
using sublet::Device;

TEST(HostBackend, BlocksAreWritableAndAligned) {
  CachingAllocator allocator(std::make_unique<HostBackend>());
  Block* b = allocator.allocate(3 * kMiB + 17);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b->ptr) % 256, 0u);
  auto* bytes = static_cast<unsigned char*>(b->ptr);
  for (std::size_t i = 0; i < 3 * kMiB + 17; ++i) bytes[i] = static_cast<unsigned char>(i * 31);
  EXPECT_EQ(bytes[3 * kMiB + 16], static_cast<unsigned char>((3 * kMiB + 16) * 31));
  allocator.free(b);
}

TEST(HostBackend, ExpandableSegmentsMapRealPages) {
  CachingAllocator allocator(std::make_unique<HostBackend>(), AllocatorConfig::parse("expandable_segments:True"));
  Block* a = allocator.allocate(5 * kMiB);
  std::memset(a->ptr, 0x5a, 5 * kMiB);  // would fault if the pages were not mapped
  Block* b = allocator.allocate(7 * kMiB);
  std::memset(b->ptr, 0x11, 7 * kMiB);
  EXPECT_EQ(static_cast<unsigned char*>(a->ptr)[5 * kMiB - 1], 0x5a);
  EXPECT_EQ(allocator.memory_reserved(), 12 * kMiB);
  allocator.free(b);
  allocator.empty_cache();
  EXPECT_EQ(allocator.memory_reserved(), 6 * kMiB);
  allocator.free(a);
  allocator.empty_cache();
  EXPECT_EQ(allocator.memory_reserved(), 0u);
}

TEST(HostBackend, ReportsRealMemoryInfo) {
  HostBackend backend;
  const MemoryInfo info = backend.memory_info();
  EXPECT_GT(info.total_bytes, std::size_t{256} * kMiB);
  EXPECT_GT(info.free_bytes, 0u);
  EXPECT_LE(info.free_bytes, info.total_bytes);
}

TEST(Registry, CpuAllocatorBacksTheTorchStyleFunctions) {
  CachingAllocator& cpu = allocator_for(Device::cpu());
  EXPECT_EQ(&cpu, &allocator_for(Device::cpu()));
  const std::size_t before = sublet::memory_allocated(Device::cpu());
  Block* b = cpu.allocate(4 * kMiB);
  EXPECT_EQ(sublet::memory_allocated(Device::cpu()), before + 4 * kMiB);
  const std::size_t reserved = sublet::memory_reserved(Device::cpu());
  cpu.free(b);
  EXPECT_EQ(sublet::memory_allocated(Device::cpu()), before);
  EXPECT_EQ(sublet::memory_reserved(Device::cpu()), reserved);
  EXPECT_GE(sublet::max_memory_allocated(Device::cpu()), before + 4 * kMiB);
  EXPECT_EQ(sublet::memory_stats(Device::cpu()).count("allocated_bytes.all.current"), 1u);
}

TEST(Registry, CudaDeviceErrorsAreClear) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present: the missing-device error cannot be shown";
  try {
    allocator_for(Device::cuda(0));
    FAIL() << "expected DeviceError";
  } catch (const sublet::DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
}

TEST(DeviceParse, AcceptsKnownNamesAndRejectsOthers) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:1"), Device::cuda(1));
  EXPECT_THROW(Device::parse("gpu"), sublet::ValueError);
  EXPECT_THROW(Device::parse("cuda:x"), sublet::ValueError);
}

// sublet's CPU default is expandable segments, whose address range is as large as physical
// memory; under a limit on the address space (ulimit -v) the default stays fixed segments, which
// serve a request the reservation could not. The limit is set in a child process.
TEST(HostBackend, ExpandableSegmentsAreTheDefaultOnlyWithoutAnAddressSpaceLimit) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &limit), 0);
  if (limit.rlim_cur != RLIM_INFINITY) GTEST_SKIP() << "this process runs under an address-space limit already";
  EXPECT_TRUE(host_address_space_allows_expandable());
  EXPECT_TRUE(default_config(Device::cpu()).expandable_segments);

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const rlimit capped{rlim_t{64} << 30, rlim_t{64} << 30};
    if (setrlimit(RLIMIT_AS, &capped) != 0) _exit(2);
    // 0: refused under the limit, as it must be.
    _exit(host_address_space_allows_expandable() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}
