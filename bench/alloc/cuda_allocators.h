#pragma once
// The CUDA baselines (built only with SUBLET_HAVE_CUDA):
//  - raw cudaMalloc/cudaFree: every request goes to the driver, which synchronises the device;
//  - cudaMallocAsync/cudaFreeAsync on the device's default memory pool, on the legacy default
//    stream, with the pool's release threshold raised to UINT64_MAX so that the pool keeps
//    what it grew (otherwise it trims at every synchronisation and measures the driver again).
#include <cuda_runtime_api.h>

#include <unordered_map>

#include "bench/alloc/allocator_under_test.h"

namespace sublet::bench {

class CudaMallocUnderTest final : public AllocatorUnderTest {
 public:
  explicit CudaMallocUnderTest(int device_index);
  ~CudaMallocUnderTest() override;
  AllocationHandle allocate(std::size_t bytes) override;
  void free(AllocationHandle handle) override;
  // The bytes asked for at the peak: the driver's own rounding is not observable.
  std::optional<std::uint64_t> peak_reserved_bytes() const override { return peak_bytes_; }
  std::optional<std::uint64_t> driver_allocation_calls() const override { return calls_; }

 private:
  std::unordered_map<void*, std::size_t> sizes_;  // a cudaMalloc costs microseconds: noise
  std::uint64_t live_bytes_ = 0;
  std::uint64_t peak_bytes_ = 0;
  std::uint64_t calls_ = 0;
};

class CudaMallocAsyncUnderTest final : public AllocatorUnderTest {
 public:
  explicit CudaMallocAsyncUnderTest(int device_index);
  // Synchronises, trims the pool to zero and restores its release threshold.
  ~CudaMallocAsyncUnderTest() override;
  AllocationHandle allocate(std::size_t bytes) override;
  void free(AllocationHandle handle) override;
  // cudaMemPoolAttrReservedMemHigh, reset at construction.
  std::optional<std::uint64_t> peak_reserved_bytes() const override;
  // The pool grows inside the driver: how often is not observable.
  std::optional<std::uint64_t> driver_allocation_calls() const override { return std::nullopt; }

 private:
  cudaMemPool_t pool_ = nullptr;
  std::uint64_t previous_release_threshold_ = 0;
};

}  // namespace sublet::bench
