#pragma once
// Waiting for a device, as torch.cuda.synchronize(): for the code above runtime/ that times or
// measures work it has queued (models/resnet_recompute.cpp), without reaching into memory/.
#include "core/device.h"

namespace sublet {

// Returns once all work queued on `device` has finished; the CPU has nothing to wait for.
void synchronize(Device device);

}  // namespace sublet
