#pragma once
// PyTorch through LibTorch, part of the torch plugin (torch_plugin.h, C++17):
//  - TorchTensorFactory: the tensor rows' baseline, at::empty({...}, options) and its destructor
//    on the CPU or a CUDA device; its pair is the allocator at::empty uses (c10's CPU allocator,
//    or the CUDA caching allocator's raw_alloc/raw_delete as TorchCachingAllocatorUnderTest);
//  - TorchCpuAllocatorUnderTest: the "torch" column of the CPU pair and churn rows, c10's CPU
//    allocator through raw_allocate/raw_deallocate. PyTorch does not cache host memory: every
//    request is a posix_memalign, counted here as one call into the system allocator.
// Devices are the plugin's ints: kTorchPluginCpu (-1) or a CUDA device index.
#include <memory>
#include <string>

#include "bench/alloc/allocator_under_test.h"
#include "bench/alloc/tensor_factory_under_test.h"

namespace sublet::bench {

class TorchCpuAllocatorUnderTest final : public AllocatorUnderTest {
 public:
  TorchCpuAllocatorUnderTest();
  AllocationHandle allocate(std::size_t bytes) override;
  void free(AllocationHandle handle) override;
  std::optional<std::uint64_t> peak_reserved_bytes() const override { return std::nullopt; }
  std::optional<std::uint64_t> driver_allocation_calls() const override { return calls_; }

  static std::string description();  // "PyTorch <version> c10 CPU allocator via raw_allocate/raw_deallocate"

 private:
  void* allocator_;  // c10::Allocator*, kept out of this header
  std::uint64_t calls_ = 0;
};

// The column's allocator on `device`; throws DeviceError for a CUDA device when the plugin was
// built without CUDA.
std::unique_ptr<AllocatorUnderTest> make_torch_allocator(int device);
std::string torch_allocator_description(int device);

class TorchTensorFactory final : public TensorFactoryUnderTest {
 public:
  // Throws DeviceError for a CUDA device when the plugin was built without CUDA.
  explicit TorchTensorFactory(int device);
  ~TorchTensorFactory() override;
  void create_destroy(const TensorShape& shape, std::size_t count) override;
  void allocate_free(std::size_t bytes, std::size_t count) override;
  std::optional<std::uint64_t> peak_reserved_bytes() const override;
  std::optional<std::uint64_t> driver_allocation_calls() const override;

  static std::string description(int device);

 private:
  int device_;
  std::unique_ptr<AllocatorUnderTest> allocator_;  // the allocator at::empty draws from
};

}  // namespace sublet::bench
