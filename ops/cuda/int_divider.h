#pragma once
// Division by a divisor fixed at launch time, as a multiply-high, an add and a shift instead
// of the ~20 (32-bit) or ~70 (64-bit) instructions of a division by a run-time value
// (Granlund and Montgomery; PyTorch's IntDivider does the same). Index decomposition in
// kernels such as max pooling's backward is otherwise bound by division, not by memory.
//
// Valid for divisors in [1, 2^31) and dividends in [0, 2^31). Built on the host, passed to a
// kernel by value. Plain C++ outside nvcc, so that the CPU suite checks it against `/`.
#include <cstdint>
#include <string>

#include "core/errors.h"

#if defined(__CUDACC__)
#define SUBLET_HOST_DEVICE __host__ __device__
#else
#define SUBLET_HOST_DEVICE
#endif

namespace sublet::ops::cuda {

inline constexpr std::int64_t kIntDividerLimit = std::int64_t{1} << 31;  // divisors and dividends stay below

class IntDivider {
 public:
  IntDivider() = default;
  explicit IntDivider(std::int64_t divisor) : divisor_(static_cast<std::uint32_t>(divisor)) {
    if (divisor < 1 || divisor >= kIntDividerLimit) {
      throw ValueError("IntDivider: divisor must be in [1, 2^31), got " + std::to_string(divisor));
    }
    while ((std::uint64_t{1} << shift_) < divisor_) ++shift_;  // shift = ceil(log2(divisor))
    // magic = floor(2^32 * (2^shift - divisor) / divisor) + 1, below 2^32 since 2^shift < 2 * divisor.
    const std::uint64_t magic = ((std::uint64_t{1} << 32) * ((std::uint64_t{1} << shift_) - divisor_)) / divisor_ + 1;
    magic_ = static_cast<std::uint32_t>(magic);
  }

  SUBLET_HOST_DEVICE std::uint32_t divisor() const { return divisor_; }

  // n / divisor for n in [0, 2^31): t + n stays below 2^32.
  SUBLET_HOST_DEVICE std::uint32_t div(std::uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const std::uint32_t t = __umulhi(n, magic_);
#else
    const std::uint32_t t = static_cast<std::uint32_t>((static_cast<std::uint64_t>(n) * magic_) >> 32);
#endif
    return (t + n) >> shift_;
  }

  // quotient and remainder together: the remainder costs one multiply-subtract more.
  SUBLET_HOST_DEVICE void divmod(std::uint32_t n, std::uint32_t& quotient, std::uint32_t& remainder) const {
    quotient = div(n);
    remainder = n - quotient * divisor_;
  }

 private:
  std::uint32_t divisor_ = 1;
  std::uint32_t magic_ = 1;
  std::uint32_t shift_ = 0;
};

}  // namespace sublet::ops::cuda
