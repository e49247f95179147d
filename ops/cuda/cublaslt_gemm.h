#pragma once
// What the GEMMs with a fused epilogue share (ops/cuda/linear_bias_cuda.cpp,
// ops/cuda/linear_gelu_cuda.cpp): the cuBLASLt handle per (thread, device), owners of the
// per-call descriptors, and one call that keeps the heuristic's algorithm per problem and turns
// cuBLASLt's refusals into a false for the caller's unfused fallback.
#include <cublasLt.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "ops/context.h"

namespace sublet::ops::cuda {

// cuBLASLt's element type for float64, float32, bfloat16 and float16; DTypeError naming `op`
// for any other dtype.
cudaDataType lt_data_type(const char* op, DType dtype);

// The largest power of two up to 256 that divides the address: cuBLASLt assumes 256 unless told.
std::uint32_t pointer_alignment(const void* pointer);

// A matmul descriptor: float64 computes in float64, every other dtype in full float32 (no TF32).
struct LtMatmulDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  explicit LtMatmulDesc(DType dtype);
  ~LtMatmulDesc();
  LtMatmulDesc(const LtMatmulDesc&) = delete;
  LtMatmulDesc& operator=(const LtMatmulDesc&) = delete;
  void set_attribute(cublasLtMatmulDescAttributes_t attribute, const void* value, std::size_t bytes);
  template <typename V>
  void set(cublasLtMatmulDescAttributes_t attribute, const V& value) {
    set_attribute(attribute, &value, sizeof(value));
  }
};

// A column-major matrix layout: rows x cols with leading dimension ld.
struct LtLayout {
  cublasLtMatrixLayout_t layout = nullptr;
  LtLayout(cudaDataType type, std::int64_t rows, std::int64_t cols, std::int64_t ld);
  ~LtLayout();
  LtLayout(const LtLayout&) = delete;
  LtLayout& operator=(const LtLayout&) = delete;
};

// D = op(A) op(B) (alpha 1, beta 0, C = D) with the epilogue set on `desc`.
struct LtProblem {
  const LtMatmulDesc& desc;
  const LtLayout& a;
  const void* a_data;
  const LtLayout& b;
  const void* b_data;
  const LtLayout& d;
  void* d_data;
};

// Runs `problem` on the context's stream with the cuBLAS workspace. `key` tells this problem
// apart from every other (op, sizes, and the alignment of any epilogue pointer; the device,
// dtype and alignments of A, B and D are added here): the heuristic runs once per key. False,
// writing nothing, when cuBLASLt has no algorithm or refuses the call before launching (kept
// for the key); CudaError naming `what` for any other failure.
bool lt_matmul(const Context& ctx, DType dtype, std::vector<std::int64_t> key, const LtProblem& problem,
               const std::string& what);

}  // namespace sublet::ops::cuda
