#include "runtime/storage.h"

#include "memory/registry.h"
#include "runtime/allocation_scope.h"

namespace sublet {

Storage Storage::allocate(std::size_t bytes, Device device, StreamHandle stream) {
  auto& allocator = memory::allocator_for(device);
  Storage storage;
  auto impl = std::make_shared<Impl>();
  impl->allocator = &allocator;
  impl->nbytes = bytes;
  impl->device = device;
  impl->block = allocator.allocate(bytes, stream, current_allocation_category());
  storage.impl_ = std::move(impl);
  return storage;
}

Storage::Impl::~Impl() {
  if (block) allocator->free(block);
}

memory::BlockCategory Storage::category() const {
  return impl_ ? impl_->block->category : memory::BlockCategory::Unknown;
}

void Storage::set_category(memory::BlockCategory category) const {
  if (impl_) impl_->allocator->set_category(impl_->block, category);
}

}  // namespace sublet
