#pragma once
// What every kernel needs besides its operands: the device it runs on, the stream to launch
// on, and the allocator that serves its workspaces (so memory stats include workspaces).
#include "memory/caching_allocator.h"
#include "memory/current_stream.h"
#include "core/device.h"
#include "memory/registry.h"

namespace sublet::ops {

struct Context {
  Device device = Device::cpu();
  StreamHandle stream = nullptr;
  memory::CachingAllocator* allocator = nullptr;

  static Context for_device(Device device, StreamHandle stream = nullptr) {
    return Context{device, stream ? stream : memory::current_stream(device), &memory::allocator_for(device)};
  }
  // A workspace of `bytes` for the duration of a kernel call, tagged as such in the stats.
  memory::ScopedBlock workspace(std::size_t bytes) const {
    return memory::ScopedBlock(*allocator, bytes, stream, memory::BlockCategory::Workspace);
  }
};

}  // namespace sublet::ops
