#pragma once
// CPU kernels for bfloat16 and float16 that reuse the float32 ones: each widens its 16-bit
// operands into float32 scratch buffers, runs the float32 CPU kernel, and rounds the result to
// the 16-bit type once (round to nearest even, core/half.h). That is what a 16-bit kernel which
// accumulates in float32 computes, so autocast and its policy tests run on the CPU; it is not
// fast (three passes over memory), and the CPU has no 16-bit arithmetic to be fast with.
// The scratch buffers come from the context's allocator as workspaces, so they show in the
// memory statistics.
//
// Covered: element-wise unary/binary/ternary, reduce_sum, reduce_extremum, matmul, conv2d forward
// and both backwards, batch norm (16-bit activations with float32 parameters and statistics, as
// ops/batch_norm_kernels.h asks of 16-bit inputs), the poolings, all NCHW, and GELU. Registered by
// ops/cpu/register_cpu_kernels.cpp.
namespace sublet::ops::cpu {

void register_half_adapters();

}  // namespace sublet::ops::cpu
