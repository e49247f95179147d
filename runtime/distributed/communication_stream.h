#pragma once
// One communication stream per CUDA device for the life of the process, never destroyed (as
// PyTorch's stream pool). Blocks used on it are recorded there (record_stream) and may be freed
// after their group is gone (a parameter's gradient, a view into a bucket, outlives the
// DataParallel that made it); the allocator then records an event on this stream, which must
// still exist. CUDA builds only; NCCL's and Gloo's groups share it.
#include "core/device.h"

namespace sublet::distributed {

StreamHandle communication_stream(Device device);

}  // namespace sublet::distributed
