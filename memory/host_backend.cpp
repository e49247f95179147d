#include "memory/host_backend.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/errors.h"

namespace sublet::memory {
namespace {
// Wide enough for any SIMD load and for cache-line-sized chunks per thread.
constexpr std::size_t kHostAlignment = 256;
static_assert(kHostAlignment % kBackendAlignment == 0);

std::size_t meminfo_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::size_t value_kib = 0;
  std::string unit;
  while (in >> key >> value_kib >> unit)
    if (key == "MemAvailable:") return value_kib * 1024;
  return 0;
}
}  // namespace

void* HostBackend::allocate(std::size_t bytes) {
  if (bytes > SIZE_MAX - (kHostAlignment - 1)) return nullptr;  // rounding up would wrap to a tiny size
  return std::aligned_alloc(kHostAlignment, (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment);
}

void HostBackend::deallocate(void* ptr, std::size_t /*bytes*/) { std::free(ptr); }

MemoryInfo HostBackend::memory_info() const {
  const auto pages = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES));
  const auto page_size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return MemoryInfo{meminfo_available_bytes(), pages * page_size};
}

void* HostBackend::reserve(std::size_t bytes) {
  void* base = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return base == MAP_FAILED ? nullptr : base;
}

void HostBackend::release(void* base, std::size_t bytes) { munmap(base, bytes); }

bool HostBackend::map(void* address, std::size_t bytes) {
  return mprotect(address, bytes, PROT_READ | PROT_WRITE) == 0;
}

void HostBackend::unmap(void* address, std::size_t bytes) {
  // Give the physical pages back now, and make later touches fault like unmapped device memory.
  madvise(address, bytes, MADV_DONTNEED);
  mprotect(address, bytes, PROT_NONE);
}

bool host_address_space_allows_expandable() {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur != RLIM_INFINITY) return false;
  HostBackend host;
  const std::size_t range = host.memory_info().total_bytes;
  void* base = host.reserve(range);
  if (!base) return false;
  host.release(base, range);
  return true;
}

}  // namespace sublet::memory
