#pragma once
// The CUDA libraries sublet does not link but opens with dlopen on first use (cuBLAS, cuBLASLt:
// their relocated data would weigh on every CPU-only command; ops/cuda/cublas_loader.cpp,
// cublaslt_loader.cpp), and their functions looked up by name.
#include <string>

namespace sublet::ops::cuda {

// Opens `versioned` ("libcublas.so.13"), else `unversioned` ("libcublas.so"); null when neither
// loads.
void* open_library(const std::string& versioned, const char* unversioned);

// The function `name` of `library` (open_library's result). A library that did not load, or one
// without the function, is a CudaError naming `what` ("cuBLAS") and the file it looked for.
void* library_function(void* library, const char* what, const std::string& versioned, const char* name);

}  // namespace sublet::ops::cuda
