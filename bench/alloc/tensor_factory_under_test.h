#pragma once
// One runtime's tensors as the tensor rows see them (tensor_workload.h times them). Kept apart
// from the timing code because the PyTorch plugin implements this interface too: this header is
// part of the plugin ABI (torch_plugin.h), so it must stay C++17 and include nothing of sublet's.
// Changing a type or a virtual function here changes that ABI: bump kTorchPluginAbiVersion.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sublet::bench {

// A float32 tensor shape of one or two dimensions (the callers write {a} or {a, b} literally).
// The member functions live in sublet_bench (tensor_workload.cpp): a plugin reads dims and ndim.
struct TensorShape {
  std::array<std::int64_t, 2> dims{};
  std::size_t ndim = 1;

  std::size_t bytes() const;             // float32 elements * 4
  std::vector<std::int64_t> sizes() const;
  std::string str() const;               // "[1024, 1024]"
};

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

}  // namespace sublet::bench
