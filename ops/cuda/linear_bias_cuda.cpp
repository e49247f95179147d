// Row-major out[m, n] = x[m, k] w[n, k]^T + bias, read column-major, is out^T[n, m] = w x^T:
// cuBLASLt's D (n x m, ld n) = op_T(A) op_N(B) with A = w read as a column-major [k, n] (ld k)
// and B = x as a column-major [k, m] (ld k); CUBLASLT_EPILOGUE_BIAS adds a vector of D's row
// count (n), which is the bias. The workspace is the context's, as the cuBLAS path
// takes it, and the heuristic's algorithm is kept per (device, dtype, shape, alignments).
// 16-bit: split-K partial sums only in float32 (the reduction-scheme preference), as the cuBLAS
// path's CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION.
#include "ops/cuda/linear_bias_cuda.h"

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "core/errors.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/handles.h"
#include "ops/cuda/stream.h"

namespace sublet::ops::cuda {
namespace {

// One cuBLASLt handle per (thread, device), destroyed at thread exit (as ops/cuda/handles.cpp).
struct ThreadLtHandles {
  std::map<int, cublasLtHandle_t> by_device;
  ~ThreadLtHandles() {
    for (auto& entry : by_device) cublasLtDestroy(entry.second);  // errors ignored: a destructor must not throw
  }
};

cublasLtHandle_t lt_handle(const Context& ctx) {
  thread_local ThreadLtHandles handles;
  auto found = handles.by_device.find(ctx.device.index);
  if (found == handles.by_device.end()) {
    cublasLtHandle_t handle = nullptr;
    SUBLET_CUBLAS_CHECK(cublasLtCreate(&handle));
    found = handles.by_device.emplace(ctx.device.index, handle).first;
  }
  return found->second;
}

// Owners of the per-call descriptors: destroyed also when a later call throws.
struct MatmulDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  MatmulDesc(cublasComputeType_t compute, cudaDataType_t scale) {
    SUBLET_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, compute, scale));
  }
  ~MatmulDesc() { cublasLtMatmulDescDestroy(desc); }
  MatmulDesc(const MatmulDesc&) = delete;
  MatmulDesc& operator=(const MatmulDesc&) = delete;
  template <typename V>
  void set(cublasLtMatmulDescAttributes_t attribute, const V& value) {
    SUBLET_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
  }
};

struct Layout {
  cublasLtMatrixLayout_t layout = nullptr;
  Layout(cudaDataType type, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
    SUBLET_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<std::uint64_t>(rows),
                                                   static_cast<std::uint64_t>(cols), ld));
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(layout); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};

struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  Preference() { SUBLET_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref)); }
  ~Preference() { cublasLtMatmulPreferenceDestroy(pref); }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  template <typename V>
  void set(cublasLtMatmulPreferenceAttributes_t attribute, const V& value) {
    SUBLET_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value)));
  }
};

// The largest power of two up to 256 that divides the address: cuBLASLt assumes 256 unless told.
std::uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  std::uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// device, dtype, m, k, n, alignments of w, x, out.
using PlanKey = std::tuple<int, int, std::int64_t, std::int64_t, std::int64_t, std::uint32_t, std::uint32_t,
                           std::uint32_t>;
struct Plan {
  bool usable = false;  // false: no algorithm, or cuBLASLt refused it; the caller falls back
  cublasLtMatmulAlgo_t algo{};
};

std::mutex plan_mutex;
std::map<PlanKey, Plan>& plans() {
  static std::map<PlanKey, Plan> cache;
  return cache;
}

std::string geometry_text(DType dtype, const LinearBiasGeometry& g) {
  return std::string("linear_bias (") + dtype_name(dtype) + ", m " + std::to_string(g.m) + ", k " +
         std::to_string(g.k) + ", n " + std::to_string(g.n) + ")";
}

}  // namespace

bool linear_bias(const Context& ctx, DType dtype, const LinearBiasGeometry& g, void* out, const void* x,
                 const void* w, const void* bias) {
  if (g.m == 0 || g.n == 0) return true;  // nothing to write
  if (g.k == 0) return false;             // an empty product: the fallback writes the broadcast bias
  cudaDataType type;
  switch (dtype) {
    case DType::Float64: type = CUDA_R_64F; break;
    case DType::Float32: type = CUDA_R_32F; break;
    case DType::BFloat16: type = CUDA_R_16BF; break;
    case DType::Float16: type = CUDA_R_16F; break;
    default: throw DTypeError(std::string("linear_bias: no CUDA kernel for ") + dtype_name(dtype));
  }
  // The epilogue reads the bias with vector loads; a bias at an odd offset goes the unfused way.
  if (alignment_of(bias) < 16) return false;
  memory::CudaDeviceGuard device(ctx.device);
  const std::size_t workspace_bytes = cublas_workspace_bytes(ctx.device.index);

  const bool is_double = dtype == DType::Float64;
  MatmulDesc desc(is_double ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F, is_double ? CUDA_R_64F : CUDA_R_32F);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
  desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  desc.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type);
  const Layout a(type, g.k, g.n, g.k), b(type, g.k, g.m, g.k), d(type, g.n, g.m, g.n);

  const PlanKey key{ctx.device.index, static_cast<int>(dtype), g.m, g.k, g.n,
                    alignment_of(w), alignment_of(x), alignment_of(out)};
  Plan plan;
  {
    std::lock_guard<std::mutex> lock(plan_mutex);
    auto found = plans().find(key);
    if (found != plans().end()) {
      plan = found->second;
    } else {
      Preference pref;
      pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<std::uint64_t>(workspace_bytes));
      if (dtype == DType::BFloat16 || dtype == DType::Float16) {
        pref.set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                 static_cast<std::uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
      }
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, std::get<5>(key));
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, std::get<6>(key));
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, std::get<7>(key));
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, std::get<7>(key));
      cublasLtMatmulHeuristicResult_t result{};
      int returned = 0;
      const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt_handle(ctx), desc.desc, a.layout, b.layout,
                                                                   d.layout, d.layout, pref.pref, 1, &result, &returned);
      plan.usable = status == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS;
      if (plan.usable) plan.algo = result.algo;
      plans().emplace(key, plan);
    }
  }
  if (!plan.usable) return false;

  const float alpha = 1.0f, beta = 0.0f;  // the scale type: float, or double for float64
  const double alpha_double = 1.0, beta_double = 0.0;
  memory::ScopedBlock workspace = ctx.workspace(workspace_bytes);
  const void* alpha_pointer = is_double ? static_cast<const void*>(&alpha_double) : &alpha;
  const void* beta_pointer = is_double ? static_cast<const void*>(&beta_double) : &beta;
  const cublasStatus_t status =
      cublasLtMatmul(lt_handle(ctx), desc.desc, alpha_pointer, w, a.layout, x, b.layout, beta_pointer, out, d.layout,
                     out, d.layout, &plan.algo, workspace.get(), workspace_bytes, stream_of(ctx.stream));
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE) {
    // Refused before launching anything: remember it, and let the caller take the unfused way.
    std::lock_guard<std::mutex> lock(plan_mutex);
    plans()[key].usable = false;
    return false;
  }
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw CudaError("cublasLtMatmul failed for " + geometry_text(dtype, g) + ": " + cublasGetStatusName(status) +
                    " (" + cublasGetStatusString(status) + ")");
  }
  return true;
}

}  // namespace sublet::ops::cuda
