#pragma once
// A seeded source of random numbers (std::mt19937_64). Factories that draw take a Generator&;
// the same seed gives the same tensors on every platform and device. default_generator() serves
// calls that pass none; manual_seed() reseeds it (as torch.manual_seed).
#include <cstdint>
#include <random>

namespace sublet {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : engine_(seed) {}
  void manual_seed(std::uint64_t seed) { engine_.seed(seed); }
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

// Process-wide; not synchronised: threads that draw concurrently should use their own Generator.
Generator& default_generator();
void manual_seed(std::uint64_t seed);

}  // namespace sublet
