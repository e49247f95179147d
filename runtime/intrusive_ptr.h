#pragma once
// IntrusivePtr<T>: a reference-counted handle whose count lives in the object, as PyTorch's
// c10::intrusive_ptr. Against std::shared_ptr it has no control block (no allocation of its own,
// no weak count), and the last owner releases without a read-modify-write: an owner that reads
// a count of 1 holds the only reference, and nobody without a reference can take one.
// Counts are atomic: tensors cross threads (data loaders, autograd from several threads).
//
// T provides `RefCount& refs() const` and `static void destroy(T*) noexcept`, which is called
// once the last reference is gone and ends the object's life (delete, or whatever matches how
// it was made: see SharedAllocation).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

namespace sublet {

class RefCount {
 public:
  RefCount() noexcept = default;
  RefCount(const RefCount&) = delete;
  RefCount& operator=(const RefCount&) = delete;

  void retain() noexcept { count_.fetch_add(1, std::memory_order_relaxed); }
  // True when that was the last reference: the caller destroys the object.
  bool release() noexcept {
    return count_.load(std::memory_order_acquire) == 1 || count_.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }
  std::uint32_t use_count() const noexcept { return count_.load(std::memory_order_relaxed); }
  // The caller's reference is the only one (acquire: other owners' releases happened before).
  bool unique() const noexcept { return count_.load(std::memory_order_acquire) == 1; }

 private:
  std::atomic<std::uint32_t> count_{1};  // the creator's reference, adopted by IntrusivePtr::adopt
};

template <typename T>
class IntrusivePtr {
 public:
  IntrusivePtr() noexcept = default;
  IntrusivePtr(std::nullptr_t) noexcept {}  // NOLINT(google-explicit-constructor): as shared_ptr
  // Takes over the reference a new object is born with (its count starts at 1).
  static IntrusivePtr adopt(T* object) noexcept {
    IntrusivePtr p;
    p.object_ = object;
    return p;
  }

  IntrusivePtr(const IntrusivePtr& other) noexcept : object_(other.object_) {
    if (object_) object_->refs().retain();
  }
  IntrusivePtr(IntrusivePtr&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  IntrusivePtr& operator=(const IntrusivePtr& other) noexcept {
    IntrusivePtr(other).swap(*this);
    return *this;
  }
  IntrusivePtr& operator=(IntrusivePtr&& other) noexcept {
    IntrusivePtr(std::move(other)).swap(*this);
    return *this;
  }
  ~IntrusivePtr() { reset(); }

  void reset() noexcept {
    if (T* object = std::exchange(object_, nullptr))
      if (object->refs().release()) T::destroy(object);
  }
  // Gives up the pointer without touching the count (the caller now holds that reference).
  T* release_reference() noexcept { return std::exchange(object_, nullptr); }
  void swap(IntrusivePtr& other) noexcept { std::swap(object_, other.object_); }

  T* get() const noexcept { return object_; }
  T& operator*() const noexcept { return *object_; }
  T* operator->() const noexcept { return object_; }
  explicit operator bool() const noexcept { return object_ != nullptr; }
  long use_count() const noexcept { return object_ ? static_cast<long>(object_->refs().use_count()) : 0; }

  friend bool operator==(const IntrusivePtr& a, const IntrusivePtr& b) noexcept { return a.object_ == b.object_; }
  friend bool operator==(const IntrusivePtr& a, std::nullptr_t) noexcept { return a.object_ == nullptr; }

 private:
  T* object_ = nullptr;
};

// Two reference-counted objects that live in one heap allocation (a new tensor and its storage:
// one allocation instead of two) and die independently: the memory goes back when the second
// of them is destroyed. The header sits at the start of the allocation.
struct SharedAllocation {
  std::atomic<std::uint32_t> parts_alive{2};

  static void* allocate(std::size_t bytes) { return ::operator new(bytes); }
  // Releases the whole allocation now: for a caller that knows both parts are dead.
  void free() noexcept { ::operator delete(static_cast<void*>(this)); }
  // One part is destroyed; the second to get here frees the memory.
  void release_part() noexcept {
    if (parts_alive.load(std::memory_order_acquire) == 1 || parts_alive.fetch_sub(1, std::memory_order_acq_rel) == 1)
      free();
  }
};

}  // namespace sublet
