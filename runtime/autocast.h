#pragma once
// Automatic mixed precision, the C++ form of torch.autocast: while an AutocastGuard is enabled on
// this thread, the ops that gain from 16-bit math (conv2d, linear, matmul) cast their float32
// inputs to the guard's dtype, and the ops that need float32's range and precision
// (log_softmax, softmax, layer_norm, nll_loss, sum and mean) cast 16-bit inputs up to float32.
// cross_entropy reads 16-bit logits as they are where the device has 16-bit kernels (CUDA) and
// returns a float32 loss either way: the result PyTorch's float32 policy gives, without a
// float32 copy of the logits. Every other op follows its inputs (element-wise ops and GELU;
// element-wise ops promote a 16-bit/float32 mix to float32, as PyTorch's type promotion does);
// batch norm takes a 16-bit input as is with float32 parameters.
//
//   {
//     sublet::AutocastGuard autocast(DType::BFloat16);
//     Tensor loss = F::cross_entropy(model(x), labels);  // convs in bfloat16, the loss in float32
//   }
//   loss.backward();  // parameters and their .grad stay float32 (master weights)
//
// The casts are autograd ops, so gradients flow back to the float32 leaves in float32. A leaf
// that requires grad (a parameter) is cast once per outermost guard and the copy reused (a weight
// used twice is cast once); the cache is dropped when the outermost guard exits. Wrap the forward
// pass of each step in its own guard, as with torch.autocast; a guard around a whole training
// loop works too: a copy is cast again once its parameter has changed in place (optimizer step)
// or a backward has gone through it. The cast copies are tagged
// memory::BlockCategory::Autocast in the allocator's history and the memory study.
//
// The state is per thread and guards nest: each guard restores the state it found. Backward runs
// with autocast off (the engine's guard): gradients keep the dtypes of the forward.
#include <initializer_list>

#include "core/dtype.h"
#include "runtime/tensor.h"

namespace sublet {

class AutocastGuard {
 public:
  // dtype must be BFloat16 or Float16 (ValueError otherwise). enabled=false switches autocast
  // off for the scope (e.g. a float32 region inside an autocast one).
  explicit AutocastGuard(DType dtype = DType::BFloat16, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool previous_enabled_;
  DType previous_dtype_;
};

namespace amp {

bool autocast_is_enabled();
DType autocast_dtype();  // the innermost guard's dtype (BFloat16 outside any guard)

// The policy's two casts, for the ops' fronts. Each front starts with one line:
//   if (amp::casts_to_lower({a, b})) return op(amp::to_lower(a), amp::to_lower(b));
// casts_to_*: whether autocast is on and some defined operand would change dtype. to_*: the
// tensor in the target dtype (the same handle when autocast is off, the tensor is undefined, or
// it is not a candidate: float64 and integer tensors are never cast, as in PyTorch).
bool casts_to_lower(std::initializer_list<Tensor> tensors);
Tensor to_lower(const Tensor& t);    // float32 (or the other 16-bit type) -> autocast_dtype()
bool casts_to_float32(std::initializer_list<Tensor> tensors);
Tensor to_float32(const Tensor& t);  // bfloat16/float16 -> float32

// The 16-bit copy that to_lower(t) gives, as data only: no cast node is recorded and the result
// does not require grad. For the fused CUDA linear nodes, which take the float32 parameter itself
// as their autograd input and write its gradient in float32 from the GEMM. A parameter's copy
// comes from and goes into the same cache as to_lower's, so it is still cast once per guard
// whichever of the two asks first. Returns t itself where to_lower would.
Tensor lower_data(const Tensor& t);

// How many leaf casts the cache holds now (tests).
std::size_t autocast_cached_casts();

}  // namespace amp
}  // namespace sublet
