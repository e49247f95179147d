// The PyTorch side of test_dlpack_torch: a small shared object, built against the PyTorch of the
// python3 on PATH by `scripts/build_torch_plugin.sh --dlpack OUT.so` (plain c++, C++17, as the
// bench's torch plugin), that the test loads with dlopen. It includes only PyTorch's headers (its
// own DLPack header, 0.6 in Debian's PyTorch 1.13, 1.x in PyTorch >= 2.9), never sublet's, so the
// managed tensors cross as void*: the struct layouts are DLPack's ABI on both sides.
//
// Each round trip takes over a managed tensor from sublet (at::fromDLPack / fromDLPackVersioned:
// PyTorch calls sublet's deleter when its tensor dies), doubles it in place there (mul_(2)), and
// hands it back (at::toDLPack / toDLPackVersioned), with the data pointer PyTorch saw. On CUDA the
// plugin waits for PyTorch's stream before returning: the DLPack exchange itself synchronises
// nothing, and the test reads the values on sublet's stream at once.
#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>
#include <torch/version.h>

#include <cstddef>
#include <cstring>
#include <exception>
#include <stdexcept>

#ifdef SUBLET_TORCH_PLUGIN_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#define SUBLET_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

int fail(const std::exception& e, char* error, std::size_t error_size) {
  if (error != nullptr && error_size > 0) {
    std::strncpy(error, e.what(), error_size - 1);
    error[error_size - 1] = '\0';
  }
  return -1;
}

void double_in_place(at::Tensor& tensor) {
  tensor.mul_(2);
#ifdef SUBLET_TORCH_PLUGIN_WITH_CUDA
  if (tensor.is_cuda()) c10::cuda::getCurrentCUDAStream(tensor.device().index()).synchronize();
#endif
}

}  // namespace

SUBLET_EXPORT const char* sublet_torch_dlpack_version() { return TORCH_VERSION; }

SUBLET_EXPORT int sublet_torch_dlpack_has_cuda() {
#ifdef SUBLET_TORCH_PLUGIN_WITH_CUDA
  return 1;
#else
  return 0;
#endif
}

// 1 when this PyTorch speaks DLPack 1.x (DLManagedTensorVersioned, at::toDLPackVersioned).
SUBLET_EXPORT int sublet_torch_dlpack_has_versioned() {
#if defined(DLPACK_MAJOR_VERSION) && DLPACK_MAJOR_VERSION >= 1
  return 1;
#else
  return 0;
#endif
}

// input: a DLManagedTensor* (legacy struct); *output: PyTorch's DLManagedTensor* of the doubled
// tensor; *torch_data: the tensor's data pointer in PyTorch. 0, or -1 with the message in error.
SUBLET_EXPORT int sublet_torch_dlpack_double_legacy(void* input, void** output, void** torch_data, char* error,
                                                    std::size_t error_size) {
  try {
    at::Tensor tensor = at::fromDLPack(static_cast<DLManagedTensor*>(input));
    double_in_place(tensor);
    *torch_data = tensor.data_ptr();
    *output = at::toDLPack(tensor);
    return 0;
  } catch (const std::exception& e) {
    return fail(e, error, error_size);
  }
}

// The same with DLManagedTensorVersioned (flags and version included); -1 with a message when
// this PyTorch has no DLPack 1.x.
SUBLET_EXPORT int sublet_torch_dlpack_double_versioned(void* input, void** output, void** torch_data, char* error,
                                                       std::size_t error_size) {
  try {
#if defined(DLPACK_MAJOR_VERSION) && DLPACK_MAJOR_VERSION >= 1
    at::Tensor tensor = at::fromDLPackVersioned(static_cast<DLManagedTensorVersioned*>(input));
    double_in_place(tensor);
    *torch_data = tensor.data_ptr();
    *output = at::toDLPackVersioned(tensor);
    return 0;
#else
    (void)input;
    (void)output;
    (void)torch_data;
    throw std::runtime_error("PyTorch " TORCH_VERSION " has no DLPack 1.x (DLManagedTensorVersioned)");
#endif
  } catch (const std::exception& e) {
    return fail(e, error, error_size);
  }
}
