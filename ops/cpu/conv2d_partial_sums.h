#pragma once
// The last step of the CPU weight-gradient kernels (ops/cpu/conv2d_cpu.cpp, conv2d_avx2_cpu.cpp,
// conv2d_stride2_cpu.cpp): each thread summed its images into its own [weight | bias] partial;
// the partials are added in thread order (a fixed order, so the float rounding does not vary
// between runs) and written out.
#include <cstdint>

namespace sublet::ops::cpu {

// Called by every thread of an OpenMP parallel region (an orphaned `omp for`: each thread owns
// a static slice of the result). partial_base holds `threads` partials of `partial` elements:
// weight_numel weight sums, then the bias sums (dropped when grad_bias is null).
template <typename T>
void write_partial_sums(const T* partial_base, std::int64_t partial, int threads, std::int64_t weight_numel,
                        T* grad_weight, T* grad_bias) {
#pragma omp for schedule(static)
  for (std::int64_t i = 0; i < partial; ++i) {
    T sum = T(0);
    for (int t = 0; t < threads; ++t) sum += partial_base[t * partial + i];
    if (i < weight_numel) {
      grad_weight[i] = sum;
    } else if (grad_bias != nullptr) {
      grad_bias[i - weight_numel] = sum;
    }
  }
}

}  // namespace sublet::ops::cpu
