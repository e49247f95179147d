#pragma once
// The bytes behind one or more tensors: owns exactly one allocator Block and hands it back
// (allocator.free) when the last Tensor or view referring to it dies. memory_allocated() drops
// at that moment; memory_reserved() does not, because the block stays cached (two-step release).
#include <cstddef>
#include <cstdint>

#include "memory/block.h"
#include "memory/caching_allocator.h"
#include "core/device.h"
#include "runtime/intrusive_ptr.h"

namespace sublet {

// What a Storage handle points to (reference-counted in place; see intrusive_ptr.h).
class StorageImpl {
 public:
  // Takes over `block` of `allocator`; `shared` is set when this object lives in a joint
  // allocation with a TensorImpl (Tensor::empty), null when it has its own.
  StorageImpl(memory::CachingAllocator* allocator, memory::Block* block, std::size_t nbytes, Device device,
              SharedAllocation* shared) noexcept
      : allocator(allocator), block(block), nbytes(nbytes), device(device), shared_allocation_(shared) {}
  ~StorageImpl();  // block back to its allocator
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  memory::CachingAllocator* const allocator;
  memory::Block* const block;
  const std::size_t nbytes;
  const Device device;
  std::uint64_t version = 0;

  RefCount& refs() const noexcept { return refs_; }
  static void destroy(StorageImpl* storage) noexcept;
  SharedAllocation* shared_allocation() const noexcept { return shared_allocation_; }

 private:
  mutable RefCount refs_;
  SharedAllocation* const shared_allocation_;
};

class Storage {
 public:
  Storage() = default;
  // Tagged with current_allocation_category() (runtime/allocation_scope.h).
  static Storage allocate(std::size_t bytes, Device device, StreamHandle stream = nullptr);
  // Wraps a new StorageImpl (count 1), for Tensor::empty's joint allocation.
  static Storage adopt(StorageImpl* impl) noexcept {
    Storage s;
    s.impl_ = IntrusivePtr<StorageImpl>::adopt(impl);
    return s;
  }

  bool defined() const { return impl_ != nullptr; }
  void* data() const { return impl_ ? impl_->block->ptr : nullptr; }
  std::size_t nbytes() const { return impl_ ? impl_->nbytes : 0; }
  Device device() const { return impl_ ? impl_->device : Device::cpu(); }
  const memory::Block* block() const { return impl_ ? impl_->block : nullptr; }
  // Re-tags the block, e.g. a tensor that turns out to be a saved activation or a gradient.
  // The category is descriptive only (history, snapshots); the allocator never branches on it.
  memory::BlockCategory category() const;
  void set_category(memory::BlockCategory category) const;
  // The bytes are also used by work on `stream`: when the storage dies they are reused only
  // after that work (CachingAllocator::record_stream). A no-op for the block's own stream.
  void record_stream(StreamHandle stream) const;
  bool is_same(const Storage& other) const { return impl_ == other.impl_; }
  // Bumped by every in-place op on any view of this storage; autograd compares it with the
  // version a saved tensor had when it was saved.
  std::uint64_t version() const { return impl_ ? impl_->version : 0; }
  void bump_version() const { if (impl_) ++impl_->version; }
  long use_count() const { return impl_.use_count(); }
  StorageImpl* unsafe_impl() const { return impl_.get(); }
  // Gives up this handle's reference without releasing it (TensorImpl::destroy, which then ends
  // the StorageImpl itself).
  StorageImpl* release_reference() noexcept { return impl_.release_reference(); }

 private:
  IntrusivePtr<StorageImpl> impl_;
};

}  // namespace sublet
