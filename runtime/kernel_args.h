#pragma once
// Internal to runtime/: turning Tensors into what ops/ kernels take, and the checks every op
// shares. Not for users (include runtime/tensor.h).
#include <initializer_list>
#include <string>

#include "core/errors.h"
#include "ops/context.h"
#include "ops/strided.h"
#include "runtime/tensor.h"

namespace sublet::detail {

inline ops::Context context_for(const Tensor& t) { return ops::Context::for_device(t.device()); }
inline ops::StridedRef out_ref(const Tensor& t) { return {t.data_ptr(), t.strides()}; }
inline ops::ConstStridedRef in_ref(const Tensor& t) { return {t.data_ptr(), t.strides()}; }
// `t` read as if expanded to `target` (stride 0 on broadcast dims).
inline ops::ConstStridedRef in_ref(const char* op, const Tensor& t, const Shape& target) {
  return {t.data_ptr(), broadcast_strides(op, t.sizes(), t.strides(), target)};
}

inline void check_defined(const char* op, const Tensor& t) {
  if (!t.defined()) throw ValueError(std::string(op) + ": got an undefined tensor");
}

inline void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  if (a.device() != b.device()) {
    throw DeviceError(std::string(op) + ": tensors are on different devices, " + a.device().str() + " and " +
                      b.device().str());
  }
}

inline void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    throw DTypeError(std::string(op) + ": dtypes " + dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()) +
                     " differ (convert one with .to(DType))");
  }
}

inline void check_floating(const char* op, const Tensor& t) {
  if (t.dtype() == DType::Int64) {
    throw DTypeError(std::string(op) + ": expected a float32 or float64 tensor, got int64 of shape " +
                     shape_str(t.sizes()));
  }
}

// Every in-place op starts here: refuses the update where autograd would have to track it, and
// bumps the storage version so that tensors saved for backward notice the change.
void begin_inplace(const char* op, const Tensor& self, const Tensor* other = nullptr);

// A new TensorImpl over base's storage.
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, std::int64_t offset);

// ---- layouts (runtime/memory_format.cpp) ----
// The dense strides of `sizes` in `format` (ChannelsLast: 4-d, C fastest, then W, H, N).
Shape format_strides(const Shape& sizes, MemoryFormat format);
// The strides lay `sizes` out densely: no gaps, no overlap, in any dimension order.
bool is_dense_layout(const Shape& sizes, const Shape& strides);
// a and b agree on every dimension of more than one element (the others never move an offset).
bool same_layout(const Shape& sizes, const Shape& a, const Shape& b);
// An uninitialised tensor of like's sizes and options (dtype overridable) in like's layout:
// its strides when dense, else the memory format it suggests (PyTorch's preserve_format).
Tensor empty_in_layout_of(const Tensor& like, TensorOptions options);
// The output of an element-wise op whose operands broadcast to `sizes`: laid out like the first
// operand that has those sizes and a dense layout (so channels-last in, channels-last out; with
// mixed layouts the first operand wins, as in PyTorch's TensorIterator), else contiguous.
Tensor empty_elementwise_output(const Shape& sizes, TensorOptions options, std::initializer_list<const Tensor*> operands);
// `t` itself when it already has `strides` (on its non-trivial dimensions), else a copy that has them.
Tensor in_layout(const Tensor& t, const Shape& strides);
// Rewrites an element-wise problem into the simplest one the kernels see the same way, as
// TensorIterator does: when the output is dense and every input either has the output's strides
// or is one broadcast element, the problem becomes one flat run of numel elements (the
// contiguous fast path of the CPU loop and the CUDA dense kernel, for any dense layout,
// channels-last included); otherwise the dimensions are ordered by the output's strides,
// outermost first, so that the CPU loop merges them and the innermost stays the fastest.
void coalesce_elementwise(Shape& sizes, ops::StridedRef& out, std::initializer_list<ops::ConstStridedRef*> inputs);

}  // namespace sublet::detail

namespace sublet::detail {
// Sums `grad` down to `shape` (the reverse of broadcasting): the backward of expand and of
// every broadcasting op.
Tensor sum_to(const Tensor& grad, const Shape& shape);
}  // namespace sublet::detail
