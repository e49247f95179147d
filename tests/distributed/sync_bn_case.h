#pragma once
// The float64 batch of the sync batch norm test, shared by the test (plain batch norm over the
// whole batch) and its workers (sync batch norm over their rows): seeded random data, a mean
// far from zero so that a one-pass variance would show its cancellation.
#include "runtime/factories.h"
#include "runtime/generator.h"

namespace sublet::testing {

struct SyncBatchNormCase {
  std::int64_t batch = 8, channels = 3, height = 4, width = 5;
  double momentum = 0.1, eps = 1e-5;

  Tensor seeded(const Shape& shape, std::uint64_t seed) const {
    Generator generator(seed);
    return randn(shape, generator, TensorOptions().dtype(DType::Float64));
  }
  Tensor input() const { return seeded({batch, channels, height, width}, 11) * 3.0 + 40.0; }
  Tensor upstream() const { return seeded({batch, channels, height, width}, 12); }
  Tensor weight() const { return seeded({channels}, 13) + 1.0; }
  Tensor bias() const { return seeded({channels}, 14); }
};

}  // namespace sublet::testing
