#pragma once
// CUDA pooling behind ops/pooling.h (same arguments, device pointers; already validated).
#include "ops/pooling.h"

namespace sublet::ops::cuda {

// Which max-pooling kernels run. Auto: channels-last calls whose channels fill 16-byte vectors
// (and whose pointers are aligned) take the kernels vectorised over channels
// (max_pool_channels_last.h); the others take 32-bit indices with precomputed divisors whenever
// every index fits, else 64-bit. Scalar: never the vectorised kernels. Wide: always the 64-bit
// ones. Scalar and Wide let tests check, and the benchmark time, every kernel on small shapes
// (tests/ops/test_cuda_pooling.cpp, bench/kernels/kernel_bench.cpp).
enum class PoolIndexing { Auto, Scalar, Wide };

void max_pool2d_forward(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* input, void* output,
                        std::int64_t* indices, PoolIndexing indexing = PoolIndexing::Auto);
void max_pool2d_backward(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* grad_output,
                         const std::int64_t* indices, void* grad_input, PoolIndexing indexing = PoolIndexing::Auto);
// ops/pooling.h's one-byte window positions in place of the int64 indices.
void max_pool2d_forward_positions(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* input,
                                  void* output, std::uint8_t* positions, PoolIndexing indexing = PoolIndexing::Auto);
void max_pool2d_backward_positions(const Context& ctx, const Pool2dShape& shape, DType dtype,
                                   const void* grad_output, const std::uint8_t* positions, void* grad_input,
                                   PoolIndexing indexing = PoolIndexing::Auto);
void avg_pool2d_forward(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* input, void* output,
                        bool count_include_pad);
void avg_pool2d_backward(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* grad_output,
                         void* grad_input, bool count_include_pad);
void adaptive_avg_pool2d_forward(const Context& ctx, const AdaptivePool2dShape& shape, DType dtype,
                                 const void* input, void* output);
void adaptive_avg_pool2d_backward(const Context& ctx, const AdaptivePool2dShape& shape, DType dtype,
                                  const void* grad_output, void* grad_input);

}  // namespace sublet::ops::cuda
