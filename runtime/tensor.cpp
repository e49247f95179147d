#include "runtime/tensor.h"

#include <algorithm>
#include <new>
#include <ostream>

#include "core/errors.h"
#include "memory/current_stream.h"
#include "memory/registry.h"
#include "ops/copy.h"
#include "runtime/allocation_scope.h"
#include "runtime/autograd/function.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"
#include "runtime/kernel_args.h"

namespace sublet {

TensorImpl& Tensor::impl() const {
  if (!impl_) throw ValueError("use of an undefined Tensor (default-constructed or moved from)");
  return *impl_;
}

std::int64_t Tensor::size(std::int64_t dim) const { return sizes()[wrap_dim("size", dim, sizes())]; }
std::int64_t Tensor::stride(std::int64_t dim) const { return strides()[wrap_dim("stride", dim, sizes())]; }

bool Tensor::is_contiguous() const {
  std::int64_t expected = 1;
  for (std::size_t d = sizes().size(); d-- > 0;) {
    if (sizes()[d] == 1) continue;
    if (strides()[d] != expected) return false;
    expected *= sizes()[d];
  }
  return true;
}

template <typename T>
T* Tensor::data() const {
  if (dtype() != DTypeOf<T>::value) {
    throw DTypeError(std::string("data<T>: tensor is ") + dtype_name(dtype()) + ", asked for " +
                     dtype_name(DTypeOf<T>::value));
  }
  return static_cast<T*>(data_ptr());
}
template float* Tensor::data<float>() const;
template double* Tensor::data<double>() const;
template std::int64_t* Tensor::data<std::int64_t>() const;

std::string Tensor::to_string() const {
  if (!defined()) return "Tensor(undefined)";
  return "Tensor" + shape_str(sizes()) + " " + dtype_name(dtype()) + " " + device().str() +
         (requires_grad() ? " requires_grad" : "");
}

namespace {

// Tensor::empty and empty_strided after their checks: numel elements of `options`' dtype.
Tensor allocate(Shape&& sizes, Shape&& strides, std::int64_t numel, TensorOptions options) {
  const DType dtype = options.dtype();
  if (options.requires_grad() && dtype == DType::Int64) {
    throw DTypeError("empty: only floating-point tensors can require grad, got int64");
  }
  const Device device = options.device();
  const std::size_t nbytes = static_cast<std::size_t>(numel) * element_size(dtype);
  memory::CachingAllocator& allocator = memory::allocator_for(device);
  // On the current stream (as PyTorch): the stream whose kernels use the tensor, and the one a
  // CUDA graph capture routes to its private pool. With the legacy stream here, a captured step's
  // activations came from the shared pools, whose blocks other tensors could take (or
  // empty_cache() give back) while the graph still uses their addresses.
  memory::Block* block = allocator.allocate(nbytes, memory::current_stream(device), current_allocation_category());
  Tensor t(TensorImpl::make_with_storage(allocator, block, nbytes, device, std::move(sizes), std::move(strides), dtype));
  t.unsafe_impl()->requires_grad = options.requires_grad();
  return t;
}

}  // namespace

Tensor Tensor::empty(Shape sizes, TensorOptions options) {
  // One pass for the checks, the contiguous strides and the element count.
  Shape strides(sizes.size());
  std::int64_t numel = 1, stride = 1;
  for (std::size_t d = sizes.size(); d-- > 0;) {
    const std::int64_t size = sizes[d];
    if (size < 0) throw ShapeError("empty: negative size in shape " + shape_str(sizes));
    strides[d] = stride;
    stride *= std::max<std::int64_t>(size, 1);
    numel *= size;
  }
  return allocate(std::move(sizes), std::move(strides), numel, options);
}

Tensor Tensor::empty_strided(Shape sizes, Shape strides, TensorOptions options) {
  for (const std::int64_t size : sizes) {
    if (size < 0) throw ShapeError("empty_strided: negative size in shape " + shape_str(sizes));
  }
  if (!detail::is_dense_layout(sizes, strides)) {
    throw ShapeError("empty_strided: strides " + shape_str(strides) + " do not lay out shape " + shape_str(sizes) +
                     " densely (a permutation of a contiguous layout, no gaps or overlaps, was expected)");
  }
  const std::int64_t numel = shape_numel(sizes);
  return allocate(std::move(sizes), std::move(strides), numel, options);
}

namespace {

// Tensor::empty's single allocation: a TensorImpl and its StorageImpl, each constructed (and
// later destroyed) on its own in the raw space here.
struct JointTensorStorage {
  SharedAllocation header;  // first: the allocation's address is the header's
  alignas(TensorImpl) unsigned char tensor[sizeof(TensorImpl)];
  alignas(StorageImpl) unsigned char storage[sizeof(StorageImpl)];
};

JointTensorStorage& joint_of(SharedAllocation* header) { return *reinterpret_cast<JointTensorStorage*>(header); }

}  // namespace

TensorImplPtr TensorImpl::make_with_storage(memory::CachingAllocator& allocator, memory::Block* block,
                                            std::size_t nbytes, Device device, Shape&& sizes, Shape&& strides,
                                            DType dtype) {
  void* memory;
  try {
    memory = SharedAllocation::allocate(sizeof(JointTensorStorage));
  } catch (...) {
    allocator.free(block);
    throw;
  }
  auto* joint = new (memory) JointTensorStorage;  // default-initialised: only the header is written
  auto* storage = new (joint->storage) StorageImpl(&allocator, block, nbytes, device, &joint->header);
  auto* impl = new (joint->tensor) TensorImpl(Storage::adopt(storage), std::move(sizes), std::move(strides), dtype);
  impl->shared_allocation_ = &joint->header;
  return TensorImplPtr::adopt(impl);
}

void TensorImpl::destroy(TensorImpl* impl) noexcept {
  SharedAllocation* shared = impl->shared_allocation_;
  if (!shared) {
    delete impl;
    return;
  }
  auto* own_storage = std::launder(reinterpret_cast<StorageImpl*>(joint_of(shared).storage));
  if (impl->storage.unsafe_impl() == own_storage && own_storage->refs().unique()) {
    // No view shares the storage: end both and free the allocation, no atomic read-modify-write.
    impl->storage.release_reference();
    impl->~TensorImpl();
    own_storage->~StorageImpl();
    shared->free();
    return;
  }
  impl->~TensorImpl();  // releases its storage, which may free the allocation's other part
  shared->release_part();
}

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& sizes, TensorOptions options) {
  if (static_cast<std::int64_t>(values.size()) != shape_numel(sizes)) {
    throw ShapeError("from_vector: " + std::to_string(values.size()) + " values do not fill shape " +
                     shape_str(sizes) + " (" + std::to_string(shape_numel(sizes)) + " elements)");
  }
  Tensor t = empty(sizes, options.dtype(DTypeOf<T>::value).requires_grad(false));
  ops::copy_bytes(t.device(), t.data_ptr(), Device::cpu(), values.data(), values.size() * sizeof(T));
  if (options.has_dtype() && options.dtype() != DTypeOf<T>::value) t = t.to(options.dtype());
  if (options.requires_grad()) t.requires_grad_(true);
  return t;
}
template Tensor Tensor::from_vector<float>(const std::vector<float>&, const Shape&, TensorOptions);
template Tensor Tensor::from_vector<double>(const std::vector<double>&, const Shape&, TensorOptions);
template Tensor Tensor::from_vector<std::int64_t>(const std::vector<std::int64_t>&, const Shape&, TensorOptions);

template <typename T>
std::vector<T> Tensor::to_vector() const {
  NoGradGuard no_grad;  // reading values is not part of any graph
  Tensor source = to(DTypeOf<T>::value).contiguous();
  std::vector<T> values(static_cast<std::size_t>(numel()));
  ops::copy_bytes(Device::cpu(), values.data(), device(), source.data_ptr(), values.size() * sizeof(T));
  return values;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;

template <typename T>
T Tensor::item() const {
  if (numel() != 1) {
    throw ShapeError("item: expected a tensor with one element, got shape " + shape_str(sizes()));
  }
  return to_vector<T>()[0];
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template std::int64_t Tensor::item<std::int64_t>() const;

bool Tensor::requires_grad() const { return impl().requires_grad || impl().grad_fn != nullptr; }

Tensor& Tensor::requires_grad_(bool requires_grad) {
  if (!is_leaf()) {
    throw ValueError("requires_grad_: only leaf tensors can change requires_grad; this one comes from '" +
                     impl().grad_fn->name() + "' (use detach() for a new leaf)");
  }
  if (requires_grad && dtype() == DType::Int64) {
    throw DTypeError("requires_grad_: only floating-point tensors can require grad, got int64");
  }
  impl().requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const { return Tensor(impl().grad); }

void Tensor::set_grad(const Tensor& grad) {
  if (grad.defined() && grad.sizes() != sizes()) {
    throw ShapeError("set_grad: gradient of shape " + shape_str(grad.sizes()) + " for a tensor of shape " +
                     shape_str(sizes()));
  }
  impl().grad = grad.impl_ptr();
}

Tensor Tensor::detach() const {
  Tensor out = detail::make_view(*this, sizes(), strides(), storage_offset());
  return out;
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  autograd::backward({*this}, {grad}, retain_graph);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  os << t.to_string();
  if (!t.defined() || !t.device().is_cpu()) return os;
  constexpr std::int64_t kShown = 16;
  const auto values = t.to_vector<double>();
  os << " {";
  for (std::int64_t i = 0; i < std::min<std::int64_t>(t.numel(), kShown); ++i) os << (i ? ", " : "") << values[i];
  return os << (t.numel() > kShown ? ", ...}" : "}");
}

Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
Tensor operator+(const Tensor& a, double b) { return a.add(b); }
Tensor operator-(const Tensor& a, double b) { return a.sub(b); }
Tensor operator*(const Tensor& a, double b) { return a.mul(b); }
Tensor operator/(const Tensor& a, double b) { return a.div(b); }
Tensor operator+(double a, const Tensor& b) { return b.add(a); }
Tensor operator-(double a, const Tensor& b) { return b.neg().add(a); }
Tensor operator*(double a, const Tensor& b) { return b.mul(a); }
Tensor operator/(double a, const Tensor& b) { return b.pow(-1.0).mul(a); }
Tensor operator-(const Tensor& a) { return a.neg(); }

void TensorImpl::throw_modified_since_saved() const {
  throw Error("a tensor saved for backward (shape " + shape_str(sizes) + ", " + dtype_name(dtype) +
              ") was modified in place after it was saved (storage version " + std::to_string(saved_version) +
              ", now " + std::to_string(storage.version()) +
              "); its gradient would be wrong. Update it out of place, or after backward.");
}

namespace detail {

void begin_inplace(const char* op, const Tensor& self, const Tensor* other) {
  self.storage().check_writable(op);
  if (autograd::grad_mode_enabled() &&
      (self.requires_grad() || (other && other->defined() && other->requires_grad()))) {
    throw Error(std::string(op) + ": in-place ops are not recorded by autograd, and a tensor here requires grad (" +
                self.to_string() + "); run it under NoGradGuard or on detached tensors");
  }
  self.storage().bump_version();
}

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, std::int64_t offset) {
  TensorImplPtr impl =
      TensorImplPtr::adopt(new TensorImpl(Storage(base.storage()), std::move(sizes), std::move(strides), base.dtype()));
  impl->offset = offset;
  return Tensor(std::move(impl));
}

}  // namespace detail

}  // namespace sublet
