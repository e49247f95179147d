#pragma once
// What a Tensor handle points to. Views are separate TensorImpls sharing one Storage.
// Reference-counted in place (IntrusivePtr): a Tensor is one pointer, and Tensor::empty makes a
// TensorImpl and its StorageImpl in one heap allocation (see TensorImpl::destroy).
#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "runtime/intrusive_ptr.h"
#include "runtime/shape.h"
#include "runtime/storage.h"

namespace sublet {

namespace autograd {
class Node;
}

struct TensorImpl;
using TensorImplPtr = IntrusivePtr<TensorImpl>;

struct TensorImpl {
  // A user-provided constructor: `new TensorImpl()` must not zero the object before the member
  // initialisers run (value-initialisation of a class without one does).
  TensorImpl() noexcept {}
  TensorImpl(Storage&& storage, Shape&& sizes, Shape&& strides, DType dtype) noexcept
      : storage(std::move(storage)), sizes(std::move(sizes)), strides(std::move(strides)), dtype(dtype) {}
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  Storage storage;
  Shape sizes;
  Shape strides;             // in elements
  std::int64_t offset = 0;   // storage offset, in elements
  DType dtype = DType::Float32;

  // Autograd metadata. A leaf has requires_grad set and no grad_fn; a result of a recorded op
  // has grad_fn (and is output number output_nr of that node).
  bool requires_grad = false;
  TensorImplPtr grad;
  std::shared_ptr<autograd::Node> grad_fn;
  std::uint32_t output_nr = 0;

  // Set on the aliases autograd::save() makes: the storage version at saving time. Reading
  // such a tensor after an in-place change of its storage would give a wrong gradient, so
  // data() refuses.
  static constexpr std::uint64_t kNotSaved = ~std::uint64_t{0};
  std::uint64_t saved_version = kNotSaved;

  Device device() const { return storage.device(); }
  void* data() const {
    if (saved_version != kNotSaved && saved_version != storage.version()) throw_modified_since_saved();
    return static_cast<char*>(storage.data()) + offset * static_cast<std::int64_t>(element_size(dtype));
  }
  [[noreturn]] void throw_modified_since_saved() const;

  // A TensorImpl with its own allocation (views, detach, ...).
  static TensorImplPtr make() { return TensorImplPtr::adopt(new TensorImpl()); }
  // A contiguous tensor's TensorImpl and a StorageImpl over `block` in one allocation (Tensor::empty).
  // Takes over `block` even when it throws (std::bad_alloc): the block then goes back.
  static TensorImplPtr make_with_storage(memory::CachingAllocator& allocator, memory::Block* block, std::size_t nbytes,
                                         Device device, Shape&& sizes, Shape&& strides, DType dtype);

  RefCount& refs() const noexcept { return refs_; }
  // Ends the life of a TensorImpl whose last reference is gone. In a joint allocation the memory
  // goes back once the StorageImpl is gone too; when this TensorImpl held the only reference to
  // its own joint StorageImpl, both go at once, with no atomic read-modify-write.
  static void destroy(TensorImpl* impl) noexcept;

 private:
  mutable RefCount refs_;
  SharedAllocation* shared_allocation_ = nullptr;  // set by make_with_storage
};

}  // namespace sublet
