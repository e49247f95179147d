// The libraries sublet opens on first use (ops/cuda/lazy_library.h) and the forwarders built on
// it (ops/cuda/cublas_loader.cpp, cublaslt_loader.cpp), checked without a GPU: cuBLAS's status
// names and cuBLASLt's descriptors need no device. Runs where the CUDA toolkit's libraries are on
// the loader's path (CUDA builds).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <string>

#include "core/errors.h"
#include "ops/cuda/lazy_library.h"
#include "tests/throw_message.h"

namespace sublet::ops::cuda {
namespace {

const std::string kCublas = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);

TEST(LazyLibrary, FindsAFunctionOfTheVersionedLibrary) {
  void* library = open_library(kCublas, "libcublas.so");
  ASSERT_NE(library, nullptr) << "the CUDA toolkit's " << kCublas << " is not on the loader's path";
  using StatusName = const char* (*)(cublasStatus_t);
  const auto status_name = reinterpret_cast<StatusName>(library_function(library, "cuBLAS", kCublas, "cublasGetStatusName"));
  EXPECT_EQ(std::string(status_name(CUBLAS_STATUS_NOT_SUPPORTED)), "CUBLAS_STATUS_NOT_SUPPORTED");
}

TEST(LazyLibrary, AMissingLibraryOrFunctionIsACudaErrorNamingIt) {
  EXPECT_EQ(open_library("libsublet-no-such-library.so.1", "libsublet-no-such-library.so"), nullptr);
  const std::string missing = testing::message_of<CudaError>(
      [] { library_function(nullptr, "cuFoo", "libsublet-no-such-library.so.1", "cuFooCreate"); });
  EXPECT_NE(missing.find("cuFoo could not be loaded (libsublet-no-such-library.so.1"), std::string::npos) << missing;
  void* library = open_library(kCublas, "libcublas.so");
  ASSERT_NE(library, nullptr);
  const std::string absent = testing::message_of<CudaError>(
      [&] { library_function(library, "cuBLAS", kCublas, "cublasNoSuchFunction"); });
  EXPECT_NE(absent.find("cuBLAS has no function cublasNoSuchFunction"), std::string::npos) << absent;
}

// Through the forwarders the executables call (sublet links neither library).
TEST(LazyLibrary, TheForwardersReachBothLibraries) {
  EXPECT_EQ(std::string(cublasGetStatusName(CUBLAS_STATUS_SUCCESS)), "CUBLAS_STATUS_SUCCESS");
  cublasLtMatmulDesc_t desc = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  EXPECT_NE(desc, nullptr);
  EXPECT_EQ(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
}  // namespace sublet::ops::cuda
