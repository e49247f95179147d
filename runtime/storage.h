#pragma once
// The bytes behind one or more tensors: owns exactly one allocator Block and hands it back
// (allocator.free) when the last Tensor or view referring to it dies. memory_allocated() drops
// at that moment; memory_reserved() does not, because the block stays cached (two-step release).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "memory/block.h"
#include "memory/caching_allocator.h"
#include "memory/device.h"

namespace sublet {

class Storage {
 public:
  Storage() = default;
  // Tagged with current_allocation_category() (runtime/allocation_scope.h).
  static Storage allocate(std::size_t bytes, Device device, StreamHandle stream = nullptr);

  bool defined() const { return impl_ != nullptr; }
  void* data() const { return impl_ ? impl_->block->ptr : nullptr; }
  std::size_t nbytes() const { return impl_ ? impl_->nbytes : 0; }
  Device device() const { return impl_ ? impl_->device : Device::cpu(); }
  const memory::Block* block() const { return impl_ ? impl_->block : nullptr; }
  // Re-tags the block, e.g. a tensor that turns out to be a saved activation or a gradient.
  // The category is descriptive only (history, snapshots); the allocator never branches on it.
  memory::BlockCategory category() const;
  void set_category(memory::BlockCategory category) const;
  bool is_same(const Storage& other) const { return impl_ == other.impl_; }
  // Bumped by every in-place op on any view of this storage; autograd compares it with the
  // version a saved tensor had when it was saved.
  std::uint64_t version() const { return impl_ ? impl_->version : 0; }
  void bump_version() const { if (impl_) ++impl_->version; }
  long use_count() const { return impl_.use_count(); }

 private:
  struct Impl {
    memory::CachingAllocator* allocator = nullptr;
    memory::Block* block = nullptr;
    std::size_t nbytes = 0;
    Device device;
    std::uint64_t version = 0;
    ~Impl();
  };
  std::shared_ptr<Impl> impl_;
};

}  // namespace sublet
