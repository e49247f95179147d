#pragma once
// The tensor rows: what creating and destroying a tensor costs on top of the allocator that
// serves it: the runtime's own objects (TensorImpl, Storage, sizes, strides, reference counts),
// finding the device's allocator, and the allocator's allocate+free. Written as a user writes it:
//   { Tensor t = Tensor::empty({256}, options); }     sublet
//   { at::Tensor t = at::empty({256}, options); }     PyTorch
// Each cell also times the bare allocate+free of the same bytes on the same allocator, batch for
// batch in turn with the tensors, so that the runtime's overhead (tensor - pair) comes from the
// same run and the same machine conditions.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/alloc/batch_timer.h"
#include "bench/alloc/tensor_factory_under_test.h"
#include "bench/alloc/workloads.h"

namespace sublet::bench {

// A small tensor (1 KiB: the allocator's small pool, where the runtime's share is largest) and a
// larger one (4 MiB: large pool).
inline constexpr std::array<TensorShape, 2> kTensorShapes = {TensorShape{{256, 0}, 1}, TensorShape{{1024, 1024}, 2}};
// The goal for a tensor's create+destroy on sublet's default caching allocator: well under
// PyTorch's at::empty + destructor on the same machine.
inline constexpr double kTensorGoalNs = 300;

struct TensorTiming {
  Timing tensor;  // ns per create+destroy
  Timing pair;    // ns per allocate+free of the tensor's bytes
};

// Warm-up and batch counts as for the pair rows; each timed batch of tensors is followed by a
// timed batch of pairs.
TensorTiming time_tensor(TensorFactoryUnderTest& factory, const TensorShape& shape, const PairPlan& plan);

}  // namespace sublet::bench
