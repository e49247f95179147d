#include "runtime/storage.h"

#include <string>

#include "core/errors.h"
#include "memory/registry.h"
#include "runtime/allocation_scope.h"

namespace sublet {

Storage Storage::allocate(std::size_t bytes, Device device, StreamHandle stream) {
  memory::CachingAllocator& allocator = memory::allocator_for(device);
  memory::Block* block = allocator.allocate(bytes, stream, current_allocation_category());
  StorageImpl* impl;
  try {
    impl = new StorageImpl(&allocator, block, bytes, device, nullptr);
  } catch (...) {
    allocator.free(block);
    throw;
  }
  return adopt(impl);
}

Storage Storage::wrap_external(const ExternalMemory& external, std::size_t nbytes, Device device) {
  StorageImpl* impl;
  try {
    impl = new StorageImpl(external, nbytes, device);
  } catch (...) {
    if (external.release) external.release(external.context);
    throw;
  }
  return adopt(impl);
}

StorageImpl::~StorageImpl() {
  if (block) {
    allocator->free(block);
  } else if (external.release) {
    external.release(external.context);
  }
}

void Storage::throw_read_only(const char* op) {
  throw ValueError(std::string(op) + ": expected writable memory, found a read-only tensor (imported through "
                   "DLPack with DLPACK_FLAG_BITMASK_READ_ONLY set by its producer); clone() it for a writable copy");
}

void StorageImpl::destroy(StorageImpl* storage) noexcept {
  SharedAllocation* shared = storage->shared_allocation_;
  if (!shared) {
    delete storage;
    return;
  }
  storage->~StorageImpl();
  shared->release_part();
}

memory::BlockCategory Storage::category() const {
  return impl_ && impl_->block ? impl_->block->category : memory::BlockCategory::Unknown;
}

void Storage::set_category(memory::BlockCategory category) const {
  if (impl_ && impl_->block) impl_->allocator->set_category(impl_->block, category);
}

void Storage::record_stream(StreamHandle stream) const {
  if (impl_ && impl_->block) impl_->allocator->record_stream(impl_->block, stream);
}

}  // namespace sublet
