#include "ops/profiler_range.h"

#ifdef SUBLET_HAVE_CUDA
#include <cuda_profiler_api.h>

#include "memory/cuda_check.h"
#endif

namespace sublet::ops {

void profiler_range_start() {
#ifdef SUBLET_HAVE_CUDA
  SUBLET_CUDA_CHECK(cudaProfilerStart());
#endif
}

void profiler_range_stop() {
#ifdef SUBLET_HAVE_CUDA
  SUBLET_CUDA_CHECK(cudaProfilerStop());
#endif
}

}  // namespace sublet::ops
