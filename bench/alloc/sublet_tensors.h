#pragma once
// sublet's tensors under the tensor rows: Tensor::empty on a device whose allocator (the one
// memory::allocator_for finds, as in any program) is a fresh one of the column's kind:
//   caching (default or expandable knobs): the sublet columns;
//   raw (caching off, every tensor goes to the backend): the malloc and cudaMalloc columns,
//     i.e. aligned_alloc/free on the CPU and cudaMalloc/cudaFree on a GPU per tensor;
//   async (cudaMallocAsync pool): the cudaMallocAsync column.
// The registry keeps one allocator per device for the whole process, so the constructor swaps
// the cell's allocator in (memory::replace_allocator: nothing may be allocated on the device at
// that moment) and the destructor swaps a fresh default one back.
#include "bench/alloc/tensor_workload.h"
#include "memory/caching_allocator.h"
#include "memory/config.h"
#include "core/device.h"
#include "memory/registry.h"

namespace sublet::bench {

class SubletTensorFactory final : public TensorFactoryUnderTest {
 public:
  SubletTensorFactory(Device device, memory::AllocatorKind kind, memory::AllocatorConfig config);
  ~SubletTensorFactory() override;
  SubletTensorFactory(const SubletTensorFactory&) = delete;
  SubletTensorFactory& operator=(const SubletTensorFactory&) = delete;

  void create_destroy(const TensorShape& shape, std::size_t count) override;
  void allocate_free(std::size_t bytes, std::size_t count) override;
  std::optional<std::uint64_t> peak_reserved_bytes() const override;
  std::optional<std::uint64_t> driver_allocation_calls() const override;

 private:
  Device device_;
  memory::CachingAllocator* allocator_;  // owned by the registry while this factory lives
};

}  // namespace sublet::bench
