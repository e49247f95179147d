#pragma once
// Max pooling of channels-last activations vectorised over channels (max_pool_channels_last.cu):
// each thread owns 16 bytes of channels of one pixel (8 bfloat16/float16 or 4 float32 values)
// and moves them with one load or store (the per-thread work: max_pool_channels_last.cuh). The
// scalar kernels of pooling.cu serve every call these do not fit. Same values, codes and
// gradients as those, bit for bit: the same float32 comparisons in window order, the same
// additions in increasing output order.
#include <cstddef>
#include <cstdint>

#include "ops/pooling.h"

namespace sublet::ops::cuda {

// Whether the vectorised kernels take this call: channels-last float32/bfloat16/float16, the
// channel count a multiple of the vector (16 bytes), every activation pointer 16-byte aligned,
// the codes aligned to one thread's share of them, every element index below 2^31.
bool max_pool_vectorized_fits(const Pool2dShape& shape, DType dtype, const void* activation_a,
                              const void* activation_b, const void* codes, std::size_t code_bytes);

// Code: std::int64_t (indices h * W + w in the plane) or std::uint8_t (window positions); see
// max_pool_codes.cuh. Only for calls max_pool_vectorized_fits accepts.
template <typename Code>
void max_pool_forward_vectorized(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* input,
                                 void* output, Code* codes);
template <typename Code>
void max_pool_backward_vectorized(const Context& ctx, const Pool2dShape& shape, DType dtype,
                                  const void* grad_output, const Code* codes, void* grad_input);

}  // namespace sublet::ops::cuda
