#include "ops/cuda/lazy_library.h"

#include <dlfcn.h>

#include "core/errors.h"

namespace sublet::ops::cuda {

void* open_library(const std::string& versioned, const char* unversioned) {
  void* handle = ::dlopen(versioned.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) handle = ::dlopen(unversioned, RTLD_NOW | RTLD_LOCAL);
  return handle;
}

void* library_function(void* library, const char* what, const std::string& versioned, const char* name) {
  if (library == nullptr) {
    const char* why = ::dlerror();
    throw CudaError(std::string(what) + " could not be loaded (" + versioned + (why ? std::string(": ") + why : std::string()) +
                    "); install the CUDA toolkit's cuBLAS or put its lib directory on LD_LIBRARY_PATH");
  }
  void* symbol = ::dlsym(library, name);
  if (symbol == nullptr) {
    throw CudaError(std::string(what) + " has no function " + name + " (a " + what +
                    " older than this build's headers?)");
  }
  return symbol;
}

}  // namespace sublet::ops::cuda
