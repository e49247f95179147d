#pragma once
// The bytes behind one or more tensors: owns exactly one allocator Block and hands it back
// (allocator.free) when the last Tensor or view referring to it dies. memory_allocated() drops
// at that moment; memory_reserved() does not, because the block stays cached (two-step release).
//
// Or, for memory sublet did not allocate (a tensor imported through DLPack, runtime/io/dlpack.h),
// an ExternalMemory: the producer's pointer and a callback that hands it back to the producer.
// No allocator sees external memory, so memory_allocated()/memory_stats() never count it, and
// its block() is null. Such storage may be read-only: in-place ops on it throw.
#include <cstddef>
#include <cstdint>

#include "memory/block.h"
#include "memory/caching_allocator.h"
#include "core/device.h"
#include "runtime/intrusive_ptr.h"

namespace sublet {

// Memory owned by someone else. `release(context)` runs exactly once, when the last Storage
// referring to it dies (for DLPack: the producer's deleter).
struct ExternalMemory {
  void* data = nullptr;
  void (*release)(void* context) noexcept = nullptr;  // null: nothing to hand back
  void* context = nullptr;
  bool read_only = false;    // the producer forbids writes (DLPACK_FLAG_BITMASK_READ_ONLY)
  bool pinned_host = false;  // page-locked host memory (DLPack's kDLCUDAHost); the device is the CPU
};

// What a Storage handle points to (reference-counted in place; see intrusive_ptr.h).
class StorageImpl {
 public:
  // Takes over `block` of `allocator`; `shared` is set when this object lives in a joint
  // allocation with a TensorImpl (Tensor::empty), null when it has its own.
  StorageImpl(memory::CachingAllocator* allocator, memory::Block* block, std::size_t nbytes, Device device,
              SharedAllocation* shared) noexcept
      : allocator(allocator), block(block), nbytes(nbytes), device(device), shared_allocation_(shared) {}
  // Takes over external memory (allocator and block stay null).
  StorageImpl(const ExternalMemory& external, std::size_t nbytes, Device device) noexcept
      : allocator(nullptr), block(nullptr), nbytes(nbytes), device(device), external(external),
        shared_allocation_(nullptr) {}
  ~StorageImpl();  // block back to its allocator, or external memory back to its owner
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  memory::CachingAllocator* const allocator;
  memory::Block* const block;
  const std::size_t nbytes;
  const Device device;
  const ExternalMemory external;  // used when block is null
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
  // Wraps memory sublet did not allocate; `external.release` runs when the last handle dies (also
  // here, before rethrowing, if making the handle fails).
  static Storage wrap_external(const ExternalMemory& external, std::size_t nbytes, Device device);
  // Wraps a new StorageImpl (count 1), for Tensor::empty's joint allocation.
  static Storage adopt(StorageImpl* impl) noexcept {
    Storage s;
    s.impl_ = IntrusivePtr<StorageImpl>::adopt(impl);
    return s;
  }

  bool defined() const { return impl_ != nullptr; }
  void* data() const {
    if (!impl_) return nullptr;
    return impl_->block ? impl_->block->ptr : impl_->external.data;
  }
  std::size_t nbytes() const { return impl_ ? impl_->nbytes : 0; }
  Device device() const { return impl_ ? impl_->device : Device::cpu(); }
  const memory::Block* block() const { return impl_ ? impl_->block : nullptr; }  // null: external
  bool is_external() const { return impl_ && !impl_->block; }
  bool read_only() const { return is_external() && impl_->external.read_only; }
  bool pinned_host() const { return is_external() && impl_->external.pinned_host; }
  // Throws ValueError naming `op` when the storage is read-only.
  void check_writable(const char* op) const {
    if (read_only()) throw_read_only(op);
  }
  // Re-tags the block, e.g. a tensor that turns out to be a saved activation or a gradient.
  // The category is descriptive only (history, snapshots); the allocator never branches on it.
  // External memory has no block: Unknown, and set_category does nothing.
  memory::BlockCategory category() const;
  void set_category(memory::BlockCategory category) const;
  // The bytes are also used by work on `stream`: when the storage dies they are reused only
  // after that work (CachingAllocator::record_stream). A no-op for the block's own stream.
  void record_stream(StreamHandle stream) const;
  bool is_same(const Storage& other) const { return impl_ == other.impl_; }
  // Bumped by every in-place op on any view of this storage; autograd compares it with the
  // version a saved tensor had when it was saved.
  std::uint64_t version() const { return impl_ ? impl_->version : 0; }
  // Refuses read-only storage: every in-place change (ops, optimizers) passes here before writing.
  void bump_version() const {
    if (!impl_) return;
    check_writable("an in-place update");
    ++impl_->version;
  }
  long use_count() const { return impl_.use_count(); }
  StorageImpl* unsafe_impl() const { return impl_.get(); }
  // Gives up this handle's reference without releasing it (TensorImpl::destroy, which then ends
  // the StorageImpl itself).
  StorageImpl* release_reference() noexcept { return impl_.release_reference(); }

 private:
  [[noreturn]] static void throw_read_only(const char* op);
  IntrusivePtr<StorageImpl> impl_;
};

}  // namespace sublet
