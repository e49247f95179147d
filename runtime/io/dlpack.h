#pragma once
// Zero-copy exchange of tensors with other frameworks (PyTorch, JAX, CuPy, NumPy, ...) through
// DLPack (runtime/io/dlpack_abi.h declares the 1.x structs).
//
//   dlpack::DLManagedTensorVersioned* m = sublet::to_dlpack(t);  // hand m to the consumer
//   sublet::Tensor u = sublet::from_dlpack(m_from_elsewhere);      // takes it over
//
// Export. The managed tensor holds a reference to the tensor's storage: its block stays allocated
// (memory_allocated() counts it) until the consumer calls the deleter, whatever sublet does with
// its own handles meanwhile. The DLTensor's data is the tensor's first element (byte_offset 0), its
// shape and strides those of the view, so views and permuted tensors go out without a copy. A
// tensor that requires grad is refused, as PyTorch does (export t.detach()). A read-only tensor
// goes out with DLPACK_FLAG_BITMASK_READ_ONLY; the legacy struct has no flags, so to_dlpack_legacy
// refuses it.
//
// Import. from_dlpack always takes the managed tensor over: on success the producer's deleter runs
// exactly once, when the last sublet tensor or view of it dies; on failure (a sublet::Error that
// names what was expected and what was found) it has already run. Nothing is copied: strided
// producers become strided sublet views (negative strides are refused), and the memory is not the
// allocator's, so memory_allocated()/memory_stats() do not count it. A read-only producer
// (DLPACK_FLAG_BITMASK_READ_ONLY) gives a tensor whose storage is marked read-only: every in-place
// op and optimizer update on it throws ValueError before writing (data_ptr() itself cannot tell a
// read from a write; do not write through it). kDLCUDAHost (pinned host memory) becomes a CPU
// tensor that goes out again as kDLCUDAHost. A managed tensor that sublet exported comes back as a
// tensor sharing the original's storage.
//
// Streams: nothing is synchronised at the exchange. As with PyTorch's at::toDLPack/fromDLPack, the
// caller makes the consumer's stream wait for the producer's pending work on CUDA tensors (the
// Python __dlpack__(stream=...) protocol does this one level up).
//
// dtypes: float32, float64, int64, uint8, bfloat16, float16 (lanes 1). Devices: kDLCPU,
// kDLCUDA, kDLCUDAHost. DLPack major version 1, any minor version.
#include "runtime/io/dlpack_abi.h"
#include "runtime/tensor.h"

namespace sublet {

// The DLPack 1.x form (what to hand to a consumer that speaks DLPack >= 1.0).
dlpack::DLManagedTensorVersioned* to_dlpack(const Tensor& tensor);
// The pre-1.0 form (PyTorch before 2.9's at::fromDLPack, Debian's PyTorch 1.13).
dlpack::DLManagedTensor* to_dlpack_legacy(const Tensor& tensor);

Tensor from_dlpack(dlpack::DLManagedTensorVersioned* managed);
Tensor from_dlpack(dlpack::DLManagedTensor* managed);

// "float32" for {kDLFloat, 32, 1}, "complex64" for {kDLComplex, 64, 1}, ... (for messages).
std::string dlpack_dtype_name(dlpack::DLDataType dtype);

}  // namespace sublet
