#include "ops/cpu/dropout_cpu.h"

#include "ops/dropout.h"

namespace sublet::ops::cpu {

template <typename T>
void dropout_apply(std::int64_t numel, const T* input, double p, std::uint64_t seed,
                   std::uint64_t offset, T* output) {
  // p = 1 keeps nothing; the scale is then never used (and would be infinite).
  const T scale = p < 1 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < numel; ++i) {
    const bool keep = dropout_keeps(seed, offset + static_cast<std::uint64_t>(i), p);
    output[i] = keep ? input[i] * scale : T(0);
  }
}

template void dropout_apply<float>(std::int64_t, const float*, double, std::uint64_t, std::uint64_t, float*);
template void dropout_apply<double>(std::int64_t, const double*, double, std::uint64_t, std::uint64_t, double*);

}  // namespace sublet::ops::cpu
