#pragma once
// CUDA pooling behind ops/pooling.h (same arguments, device pointers; already validated).
#include "ops/pooling.h"

namespace sublet::ops::cuda {

// Index arithmetic of the max-pooling kernels. Auto: 32-bit indices with precomputed divisors
// whenever every index fits (the fast path), else 64-bit. Wide: always the 64-bit kernels, so
// that a test can check them on small shapes (tests/ops/test_cuda_pooling.cpp).
enum class PoolIndexing { Auto, Wide };

void max_pool2d_forward(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* input, void* output,
                        std::int64_t* indices, PoolIndexing indexing = PoolIndexing::Auto);
void max_pool2d_backward(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* grad_output,
                         const std::int64_t* indices, void* grad_input, PoolIndexing indexing = PoolIndexing::Auto);
void avg_pool2d_forward(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* input, void* output,
                        bool count_include_pad);
void avg_pool2d_backward(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* grad_output,
                         void* grad_input, bool count_include_pad);
void adaptive_avg_pool2d_forward(const Context& ctx, const AdaptivePool2dShape& shape, DType dtype,
                                 const void* input, void* output);
void adaptive_avg_pool2d_backward(const Context& ctx, const AdaptivePool2dShape& shape, DType dtype,
                                  const void* grad_output, void* grad_input);

}  // namespace sublet::ops::cuda
