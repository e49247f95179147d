#pragma once
// Marks the part of a run an external profiler should record. `ncu --profile-from-start off`
// (and `nsys --capture-range=cudaProfilerApi`) see only the kernels launched between
// profiler_range_start() and profiler_range_stop(), e.g. the timed steps of `sublet bench step`
// without the warm-up and the cuDNN algorithm search. Without a profiler attached, and in
// builds without CUDA, both do nothing.
namespace sublet::ops {

void profiler_range_start();
void profiler_range_stop();

}  // namespace sublet::ops
