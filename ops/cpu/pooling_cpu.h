#pragma once
// CPU pooling: each (n, c) plane is independent, so planes are spread over the OpenMP threads
// and backward passes scatter into their own plane without races.
#include <cstdint>

#include "ops/pooling.h"

namespace sublet::ops::cpu {

template <typename T>
void max_pool2d_forward(const Pool2dShape& shape, const T* input, T* output, std::int64_t* indices);
template <typename T>
void max_pool2d_backward(const Pool2dShape& shape, const T* grad_output,
                         const std::int64_t* indices, T* grad_input);
template <typename T>
void avg_pool2d_forward(const Pool2dShape& shape, const T* input, T* output, bool count_include_pad);
template <typename T>
void avg_pool2d_backward(const Pool2dShape& shape, const T* grad_output, T* grad_input,
                         bool count_include_pad);
template <typename T>
void adaptive_avg_pool2d_forward(const AdaptivePool2dShape& shape, const T* input, T* output);
template <typename T>
void adaptive_avg_pool2d_backward(const AdaptivePool2dShape& shape, const T* grad_output,
                                  T* grad_input);

}  // namespace sublet::ops::cpu
