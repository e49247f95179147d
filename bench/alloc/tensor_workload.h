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
#include "bench/alloc/workloads.h"

namespace sublet::bench {

// A float32 tensor shape of one or two dimensions (the callers write {a} or {a, b} literally).
struct TensorShape {
  std::array<std::int64_t, 2> dims{};
  std::size_t ndim = 1;

  std::size_t bytes() const;             // float32 elements * 4
  std::vector<std::int64_t> sizes() const;
  std::string str() const;               // "[1024, 1024]"
};

// A small tensor (1 KiB: the allocator's small pool, where the runtime's share is largest) and a
// larger one (4 MiB: large pool).
inline constexpr std::array<TensorShape, 2> kTensorShapes = {TensorShape{{256, 0}, 1}, TensorShape{{1024, 1024}, 2}};
// Goal of issue 7 for a tensor's create+destroy on sublet's default caching allocator
// (PyTorch's at::empty + destructor: about 1 us on the H200 machine).
inline constexpr double kTensorGoalNs = 300;

// One runtime's tensors over one allocator. Created fresh per cell; its counters cover the cell.
class TensorFactoryUnderTest {
 public:
  virtual ~TensorFactoryUnderTest() = default;
  // `count` times: create an uninitialised float32 tensor of `shape` and destroy it.
  virtual void create_destroy(const TensorShape& shape, std::size_t count) = 0;
  // `count` times: allocate `bytes` and free them, straight from the allocator the tensors use.
  virtual void allocate_free(std::size_t bytes, std::size_t count) = 0;
  // As AllocatorUnderTest: from the layer below the allocator, tensors and pairs together.
  virtual std::optional<std::uint64_t> peak_reserved_bytes() const = 0;
  virtual std::optional<std::uint64_t> driver_allocation_calls() const = 0;
};

struct TensorTiming {
  Timing tensor;  // ns per create+destroy
  Timing pair;    // ns per allocate+free of the tensor's bytes
};

// Warm-up and batch counts as for the pair rows; each timed batch of tensors is followed by a
// timed batch of pairs.
TensorTiming time_tensor(TensorFactoryUnderTest& factory, const TensorShape& shape, const PairPlan& plan);

}  // namespace sublet::bench
