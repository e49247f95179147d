#pragma once
// What every kernel needs besides its operands: the device it runs on, the stream to launch
// on, and the allocator that serves its workspaces (so memory stats include workspaces).
#include <vector>

#include "memory/caching_allocator.h"
#include "memory/current_stream.h"
#include "core/device.h"
#include "memory/registry.h"

namespace sublet::ops {

// Workspaces of kernels launched on a second stream (ops/concurrent.h): allocated on the first
// stream and kept until the second one's work is joined back into it. Freed at the end of each
// call instead, their bytes would go to the first stream's next request (or a static plan's
// next placement) while the second stream may still be using them.
struct WorkspaceHold {
  StreamHandle stream = nullptr;  // the stream the held blocks belong to
  std::vector<memory::ScopedBlock> blocks;
};

struct Context {
  Device device = Device::cpu();
  StreamHandle stream = nullptr;
  memory::CachingAllocator* allocator = nullptr;
  WorkspaceHold* workspace_hold = nullptr;  // set: workspaces are held there (see above)

  static Context for_device(Device device, StreamHandle stream = nullptr) {
    return Context{device, stream ? stream : memory::current_stream(device), &memory::allocator_for(device)};
  }
  // A workspace of `bytes` for the duration of a kernel call, tagged as such in the stats.
  memory::ScopedBlock workspace(std::size_t bytes) const {
    if (workspace_hold == nullptr) {
      return memory::ScopedBlock(*allocator, bytes, stream, memory::BlockCategory::Workspace);
    }
    workspace_hold->blocks.emplace_back(*allocator, bytes, workspace_hold->stream, memory::BlockCategory::Workspace);
    return memory::ScopedBlock::borrow(workspace_hold->blocks.back());
  }
};

}  // namespace sublet::ops
