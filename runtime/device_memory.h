#pragma once
// What the floors above runtime/ (models/, train/) ask of a device: its memory statistics, named
// as torch.cuda's (memory_allocated, max_memory_allocated, reset_peak_memory_stats, ...: declared
// with the allocators in memory/registry.h, in namespace sublet), and synchronize(), as
// torch.cuda.synchronize(). Through this header they need not include memory/.
#include "core/device.h"
#include "memory/registry.h"

namespace sublet {

// Returns once all work queued on `device` has finished; the CPU has nothing to wait for.
void synchronize(Device device);

}  // namespace sublet
