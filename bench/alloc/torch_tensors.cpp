#include "bench/alloc/torch_tensors.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorOptions.h>
#include <torch/version.h>

#include "memory/errors.h"
#ifdef SUBLET_HAVE_CUDA
#include "bench/alloc/torch_allocator.h"
#endif

namespace sublet::bench {
namespace {

void* volatile tensor_sink = nullptr;

c10::Allocator& cpu_allocator(void* allocator) { return *static_cast<c10::Allocator*>(allocator); }

// c10 errors are not sublet errors: translate so that the benchmark reports them like others.
template <typename F>
auto translate_c10_errors(const char* call, F&& f) {
  try {
    return f();
  } catch (const c10::Error& e) {
    throw Error(std::string("PyTorch ") + call + ": " + e.what_without_backtrace());
  }
}

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

TorchTensorFactory::TorchTensorFactory(Device device) : device_(device) {
  if (device.is_cpu()) {
    allocator_ = std::make_unique<TorchCpuAllocatorUnderTest>();
  } else {
#ifdef SUBLET_HAVE_CUDA
    allocator_ = std::make_unique<TorchCachingAllocatorUnderTest>(device.index);
#else
    throw DeviceError("torch tensors on " + device.str() + ": this build has no CUDA");
#endif
  }
}

TorchTensorFactory::~TorchTensorFactory() = default;

void TorchTensorFactory::create_destroy(const TensorShape& shape, std::size_t count) {
  const c10::TensorOptions options =
      c10::TensorOptions()
          .dtype(c10::kFloat)
          .device(device_.is_cpu() ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device_.index)));
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
  return device_.is_cpu() ? std::nullopt : allocator_->driver_allocation_calls();
}

std::string TorchTensorFactory::description(Device device) {
  return std::string("PyTorch ") + TORCH_VERSION + " at::empty on " + device.str() +
         (device.is_cpu() ? " (c10 CPU allocator: no cache)" : " (CUDACachingAllocator)") + " and its destructor";
}

}  // namespace sublet::bench
