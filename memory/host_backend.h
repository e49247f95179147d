#pragma once
// Host memory for CPU tensors, so that CPU runs go through the same caching logic and report
// the same statistics as GPU runs. Expandable segments use mmap: reserve with PROT_NONE,
// map by making pages accessible, unmap by giving the pages back (madvise) and protecting them.
#include "memory/backend.h"

namespace sublet::memory {

class HostBackend final : public Backend, public VirtualMemory {
 public:
  std::string name() const override { return "host"; }
  Device device() const override { return Device::cpu(); }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  MemoryInfo memory_info() const override;
  VirtualMemory* virtual_memory() override { return this; }

  std::size_t granularity() const override { return 2 * 1024 * 1024; }
  void* reserve(std::size_t bytes) override;
  void release(void* base, std::size_t bytes) override;
  bool map(void* address, std::size_t bytes) override;
  void unmap(void* address, std::size_t bytes) override;
};

// Whether expandable segments suit this process's host memory: one reserves an address range as
// large as physical memory, which a limit on the address space (ulimit -v, RLIMIT_AS) would run
// into or leave too little of for everything else. True when the address space is unlimited and
// such a range can be reserved now (it is released at once).
bool host_address_space_allows_expandable();

}  // namespace sublet::memory

