#include "bench/alloc/sublet_tensors.h"

#include <exception>

#include "runtime/tensor.h"

namespace sublet::bench {
namespace {

// Keeps the compiler from proving a tensor unused; one store per tensor.
void* volatile tensor_sink = nullptr;

}  // namespace

SubletTensorFactory::SubletTensorFactory(Device device, memory::AllocatorKind kind, memory::AllocatorConfig config)
    : device_(device) {
  std::unique_ptr<memory::CachingAllocator> fresh = memory::make_allocator(device, kind, config);
  allocator_ = fresh.get();
  memory::replace_allocator(device, std::move(fresh));
}

SubletTensorFactory::~SubletTensorFactory() {
  try {
    memory::replace_allocator(device_, memory::make_allocator(device_, memory::AllocatorKind::Caching));
  } catch (const std::exception&) {
    // Destructors must not throw; the cell's allocator then simply stays the device's allocator.
  }
}

void SubletTensorFactory::create_destroy(const TensorShape& shape, std::size_t count) {
  const TensorOptions options = TensorOptions().dtype(DType::Float32).device(device_);
  const std::int64_t rows = shape.dims[0], columns = shape.dims[1];
  if (shape.ndim == 1) {
    for (std::size_t i = 0; i < count; ++i) {
      Tensor t = Tensor::empty({rows}, options);
      tensor_sink = t.unsafe_impl();
    }
  } else {
    for (std::size_t i = 0; i < count; ++i) {
      Tensor t = Tensor::empty({rows, columns}, options);
      tensor_sink = t.unsafe_impl();
    }
  }
}

void SubletTensorFactory::allocate_free(std::size_t bytes, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) allocator_->free(allocator_->allocate(bytes));
}

std::optional<std::uint64_t> SubletTensorFactory::peak_reserved_bytes() const { return allocator_->max_memory_reserved(); }

std::optional<std::uint64_t> SubletTensorFactory::driver_allocation_calls() const {
  return static_cast<std::uint64_t>(allocator_->stats().num_device_alloc);
}

}  // namespace sublet::bench
