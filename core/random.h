#pragma once
// A small counter-based random source for data pipelines. std::shuffle and the std::
// distributions are implementation-defined, so the same seed would give different epochs on
// libstdc++ and libc++; these functions give the same numbers everywhere, which is what makes
// "order = f(seed, epoch)" and exact resume hold across machines.
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

namespace sublet::data {

// SplitMix64's finaliser: a bijective mix with good avalanche, used to derive independent
// streams from (seed, epoch, sample) tuples.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A stream key for a tuple of integers: mix(mix(mix(a) ^ b) ^ c)...
constexpr std::uint64_t stream_key(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0) {
  return mix64(mix64(mix64(a) ^ b) ^ c);
}

// The stream of an epoch's sample order: stream_key(seed, kEpochOrderStream, epoch). The
// DataLoader and the data-parallel ShardSampler both use it, so one rank's data-parallel run
// reads the same order as the plain run.
inline constexpr std::uint64_t kEpochOrderStream = 0x4f52444552000001ULL;

class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next_u64() {
    state_ += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, bound) without modulo bias (rejection on the low product, Lemire's method).
  std::uint64_t below(std::uint64_t bound) {
    if (bound == 0) return 0;
    const std::uint64_t threshold = (0 - bound) % bound;
    for (;;) {
      const unsigned __int128 product = static_cast<unsigned __int128>(next_u64()) * bound;
      if (static_cast<std::uint64_t>(product) >= threshold) {
        return static_cast<std::uint64_t>(product >> 64);
      }
    }
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Standard normal by Box-Muller (one value per call; simplicity over speed).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::uint64_t state_;
};

// Fisher-Yates with Random::below, so the permutation is identical on every platform.
template <typename T>
void shuffle_in_place(std::vector<T>& values, Random& random) {
  for (std::size_t i = values.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(random.below(i));
    std::swap(values[i - 1], values[j]);
  }
}

}  // namespace sublet::data
