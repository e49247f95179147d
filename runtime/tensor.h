#pragma once
// sublet::Tensor: a reference-counted handle (one pointer; the count lives in the TensorImpl) to
// a TensorImpl (sizes, strides, offset, dtype, Storage, autograd metadata). Copying a Tensor
// copies the handle, never the data. Views (view, permute, narrow, expand, ...) share the
// Storage; memory goes back to the allocator when the last handle to any view of it dies.
//
// Ops are differentiable: while grad mode is on (see autograd/grad_mode.h) and an input
// requires grad, each op records a node for backward. In-place ops (add_, mul_, copy_, ...)
// are for buffers and optimizer updates: they throw when autograd would have to track them, so
// call them under NoGradGuard or on tensors that do not require grad.
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "runtime/generator.h"
#include "runtime/shape.h"
#include "runtime/storage.h"
#include "runtime/tensor_impl.h"
#include "runtime/tensor_options.h"

namespace sublet {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(TensorImplPtr impl) : impl_(std::move(impl)) {}

  // ---- factories (also as free functions in runtime/factories.h) ----
  // `sizes` by value: a braced list (empty({2, 3})) becomes the tensor's own sizes, uncopied.
  static Tensor empty(Shape sizes, TensorOptions options = {});
  // In a memory format: ChannelsLast gives a 4-d tensor NHWC-dense strides (C fastest) with the
  // logical (N,C,H,W) sizes, as PyTorch's torch.empty(..., memory_format=torch.channels_last).
  static Tensor empty(Shape sizes, TensorOptions options, MemoryFormat format);
  // With given strides, which must lay the elements out densely (a permutation of some
  // contiguous layout: no gaps, no overlap); ShapeError otherwise.
  static Tensor empty_strided(Shape sizes, Shape strides, TensorOptions options = {});
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& sizes, TensorOptions options = {});

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& sizes() const { return impl().sizes; }
  const Shape& strides() const { return impl().strides; }
  std::int64_t size(std::int64_t dim) const;
  std::int64_t stride(std::int64_t dim) const;
  std::int64_t dim() const { return static_cast<std::int64_t>(impl().sizes.size()); }
  std::int64_t numel() const { return shape_numel(impl().sizes); }
  std::int64_t storage_offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().device(); }
  TensorOptions options() const { return TensorOptions().dtype(dtype()).device(device()); }
  const Storage& storage() const { return impl().storage; }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * element_size(dtype()); }
  bool is_contiguous() const;
  // Memory formats are implied by strides, as in PyTorch: a tensor is channels-last when its
  // strides are NHWC-dense (dimensions of size 1 are ignored, so a tensor can be both).
  bool is_contiguous(MemoryFormat format) const;
  // The elements fill numel consecutive slots exactly once in some order (contiguous,
  // channels-last, any permutation of a contiguous layout): element-wise kernels may then treat
  // the tensor as one flat array.
  bool is_non_overlapping_and_dense() const;
  // PyTorch's rule: ChannelsLast for a 4-d tensor whose strides are ordered C < W < H < N, with
  // its ties broken towards Contiguous (a [N,1,H,W] or [N,C,1,1] tensor made contiguous is
  // Contiguous, the same sizes made channels-last are ChannelsLast); Contiguous otherwise.
  MemoryFormat suggest_memory_format() const;
  void* data_ptr() const { return impl().data(); }
  // Typed pointer to the first element; DTypeError when T does not match the dtype.
  template <typename T>
  T* data() const;
  std::string to_string() const;  // "Tensor[2, 3] float32 cpu" (metadata only)

  // ---- views: no copy, shared storage ----
  Tensor view(const Shape& sizes) const;      // -1 infers one size; ShapeError if strides forbid
  Tensor reshape(const Shape& sizes) const;   // a view when possible, else a contiguous copy
  Tensor permute(const Shape& dims) const;
  Tensor transpose(std::int64_t dim0, std::int64_t dim1) const;
  Tensor t() const;                           // transpose of a 2-D tensor
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  Tensor slice(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  Tensor select(std::int64_t dim, std::int64_t index) const;  // removes the dimension
  Tensor expand(const Shape& sizes) const;    // -1 keeps a size
  Tensor broadcast_to(const Shape& sizes) const { return expand(sizes); }
  Tensor squeeze() const;
  Tensor squeeze(std::int64_t dim) const;
  Tensor unsqueeze(std::int64_t dim) const;
  Tensor flatten(std::int64_t start_dim = 0, std::int64_t end_dim = -1) const;
  Tensor contiguous() const;                  // this tensor itself when already contiguous
  // This tensor itself when already so, else a copy in the format (ChannelsLast: 4-d only,
  // ShapeError otherwise). Differentiable; the gradient comes back in the input's own layout.
  Tensor contiguous(MemoryFormat format) const;

  // ---- elementwise (NumPy broadcasting) ----
  Tensor add(const Tensor& other, double alpha = 1.0) const;
  Tensor sub(const Tensor& other, double alpha = 1.0) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;
  Tensor add(double value) const;
  Tensor sub(double value) const;
  Tensor mul(double value) const;
  Tensor div(double value) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  // 1 where equal, else 0, in the operands' dtype; not differentiable (e.g. accuracy:
  // logits.argmax(1).eq(labels).sum()).
  Tensor eq(const Tensor& other) const;
  Tensor neg() const;
  Tensor relu() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor pow(double exponent) const;
  Tensor clamp(double min, double max) const;
  Tensor sigmoid() const;
  Tensor tanh() const;

  // ---- in-place (not recorded by autograd; see the note at the top) ----
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& sub_(const Tensor& other, double alpha = 1.0);
  Tensor& mul_(const Tensor& other);
  Tensor& div_(const Tensor& other);
  Tensor& add_(double value);
  Tensor& mul_(double value);
  Tensor& div_(double value);
  Tensor& clamp_(double min, double max);
  Tensor& sqrt_();
  Tensor& addcmul_(const Tensor& a, const Tensor& b, double value = 1.0);  // this += value * a * b
  Tensor& addcdiv_(const Tensor& a, const Tensor& b, double value = 1.0);  // this += value * a / b
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& copy_(const Tensor& src);  // src broadcast to this shape, cast to this dtype
  Tensor& uniform_(double low, double high, Generator& generator = default_generator());
  Tensor& normal_(double mean, double stddev, Generator& generator = default_generator());

  // ---- reductions (dims may be negative; empty dims = all) ----
  Tensor sum() const;
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  Tensor max() const;                                               // over all elements
  std::pair<Tensor, Tensor> max(std::int64_t dim, bool keepdim = false) const;  // values, int64 indices
  Tensor min() const;
  std::pair<Tensor, Tensor> min(std::int64_t dim, bool keepdim = false) const;
  Tensor argmax() const;                                            // index into the flattened tensor
  Tensor argmax(std::int64_t dim, bool keepdim = false) const;
  // out[..., j, ...] = this[..., index[..., j, ...], ...] along dim (index: int64, same rank).
  Tensor gather(std::int64_t dim, const Tensor& index) const;

  // ---- linear algebra ----
  // torch.matmul: [..., m, k] @ [..., k, n] with broadcast batch dims; 1-D operands as vectors.
  Tensor matmul(const Tensor& other) const;

  // ---- conversions ----
  Tensor clone() const;            // keeps a dense layout (channels-last stays so), as PyTorch
  Tensor to(DType dtype) const;    // this tensor itself when the dtype matches
  Tensor to(Device device) const;  // a dense layout (e.g. channels-last) is kept
  // A copy in the format unless the tensor already suggests it (PyTorch's .to(memory_format)):
  // unlike contiguous(format), a [N,C,1,1] or [N,1,H,W] tensor gets the format's strides.
  Tensor to(MemoryFormat format) const;
  template <typename T>
  T item() const;                  // numel must be 1; converts to T
  template <typename T>
  std::vector<T> to_vector() const;  // row-major, converted to T

  // ---- autograd ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool requires_grad = true);  // leaves only
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  Tensor grad() const;                     // undefined until a backward reaches this leaf
  void set_grad(const Tensor& grad);       // an undefined Tensor clears it (zero_grad)
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl().grad_fn; }
  std::uint32_t output_nr() const { return impl().output_nr; }
  Tensor detach() const;                   // shares storage, no history, requires_grad false
  // grad defaults to ones for a one-element tensor. Without retain_graph each node's saved
  // tensors are freed as soon as it has run, and a second backward throws.
  void backward(const Tensor& grad = {}, bool retain_graph = false) const;

  // ---- identity ----
  TensorImpl* unsafe_impl() const { return impl_.get(); }
  const TensorImplPtr& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  TensorImpl& impl() const;
  TensorImplPtr impl_;
};

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& a);

inline Tensor matmul(const Tensor& a, const Tensor& b) { return a.matmul(b); }

// For debugging and test messages: metadata and the first values, "Tensor[2, 3] float32 cpu
// {0.5, -1, 2, 3, 4, 5}" (CPU tensors; others print metadata only).
std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Explicitly instantiated for float, double and std::int64_t.
extern template Tensor Tensor::from_vector<float>(const std::vector<float>&, const Shape&, TensorOptions);
extern template Tensor Tensor::from_vector<double>(const std::vector<double>&, const Shape&, TensorOptions);
extern template Tensor Tensor::from_vector<std::int64_t>(const std::vector<std::int64_t>&, const Shape&, TensorOptions);
extern template float* Tensor::data<float>() const;
extern template double* Tensor::data<double>() const;
extern template std::int64_t* Tensor::data<std::int64_t>() const;
extern template float Tensor::item<float>() const;
extern template double Tensor::item<double>() const;
extern template std::int64_t Tensor::item<std::int64_t>() const;
extern template std::vector<float> Tensor::to_vector<float>() const;
extern template std::vector<double> Tensor::to_vector<double>() const;
extern template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;

}  // namespace sublet
