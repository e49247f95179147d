#include "bench/alloc/torch_tensors.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorOptions.h>
#include <torch/version.h>

#include "bench/alloc/torch_errors.h"
#include "bench/alloc/torch_plugin.h"
#include "core/errors.h"
#ifdef SUBLET_TORCH_PLUGIN_WITH_CUDA
#include "bench/alloc/torch_allocator.h"
#endif

namespace sublet::bench {
namespace {

void* volatile tensor_sink = nullptr;

c10::Allocator& cpu_allocator(void* allocator) { return *static_cast<c10::Allocator*>(allocator); }

std::string device_name(int device) { return device == kTorchPluginCpu ? "cpu" : "cuda:" + std::to_string(device); }

#ifndef SUBLET_TORCH_PLUGIN_WITH_CUDA
[[noreturn]] void no_cuda(int device) {
  throw DeviceError("torch allocator on " + device_name(device) + ": this torch plugin was built without CUDA (against PyTorch " +
                    TORCH_VERSION + ")");
}
#endif

}  // namespace

TorchCpuAllocatorUnderTest::TorchCpuAllocatorUnderTest() : allocator_(c10::GetCPUAllocator()) {}

AllocationHandle TorchCpuAllocatorUnderTest::allocate(std::size_t bytes) {
  ++calls_;
  return translate_c10_errors("raw_allocate", [&] { return cpu_allocator(allocator_).raw_allocate(bytes); });
}

void TorchCpuAllocatorUnderTest::free(AllocationHandle handle) { cpu_allocator(allocator_).raw_deallocate(handle); }

std::string TorchCpuAllocatorUnderTest::description() {
  return std::string("PyTorch ") + TORCH_VERSION + " c10 CPU allocator (no cache: posix_memalign/free) via raw_allocate/raw_deallocate";
}

std::unique_ptr<AllocatorUnderTest> make_torch_allocator(int device) {
  if (device == kTorchPluginCpu) return std::make_unique<TorchCpuAllocatorUnderTest>();
#ifdef SUBLET_TORCH_PLUGIN_WITH_CUDA
  return std::make_unique<TorchCachingAllocatorUnderTest>(device);
#else
  no_cuda(device);
#endif
}

std::string torch_allocator_description(int device) {
  if (device == kTorchPluginCpu) return TorchCpuAllocatorUnderTest::description();
#ifdef SUBLET_TORCH_PLUGIN_WITH_CUDA
  return TorchCachingAllocatorUnderTest::description();
#else
  no_cuda(device);
#endif
}

TorchTensorFactory::TorchTensorFactory(int device) : device_(device), allocator_(make_torch_allocator(device)) {}

TorchTensorFactory::~TorchTensorFactory() = default;

void TorchTensorFactory::create_destroy(const TensorShape& shape, std::size_t count) {
  const c10::TensorOptions options =
      c10::TensorOptions()
          .dtype(c10::kFloat)
          .device(device_ == kTorchPluginCpu ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device_)));
  const std::int64_t rows = shape.dims[0], columns = shape.dims[1];
  translate_c10_errors("at::empty", [&] {
    if (shape.ndim == 1) {
      for (std::size_t i = 0; i < count; ++i) {
        at::Tensor t = at::empty({rows}, options);
        tensor_sink = t.unsafeGetTensorImpl();
      }
    } else {
      for (std::size_t i = 0; i < count; ++i) {
        at::Tensor t = at::empty({rows, columns}, options);
        tensor_sink = t.unsafeGetTensorImpl();
      }
    }
  });
}

void TorchTensorFactory::allocate_free(std::size_t bytes, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) allocator_->free(allocator_->allocate(bytes));
}

std::optional<std::uint64_t> TorchTensorFactory::peak_reserved_bytes() const {
  return allocator_->peak_reserved_bytes();
}

std::optional<std::uint64_t> TorchTensorFactory::driver_allocation_calls() const {
  // On the CPU at::empty's own posix_memalign calls are not counted: only the pairs' are.
  return device_ == kTorchPluginCpu ? std::nullopt : allocator_->driver_allocation_calls();
}

std::string TorchTensorFactory::description(int device) {
  return std::string("PyTorch ") + TORCH_VERSION + " at::empty on " + device_name(device) +
         (device == kTorchPluginCpu ? " (c10 CPU allocator: no cache)" : " (CUDACachingAllocator)") + " and its destructor";
}

}  // namespace sublet::bench
