// The heuristic's first algorithm is kept per problem; the workspace is the context's, as the
// cuBLAS path takes it. 16-bit: split-K partial sums only in float32 (the reduction-scheme
// preference), as the cuBLAS path's CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION.
#include "ops/cuda/cublaslt_gemm.h"

#include <map>
#include <mutex>

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

struct Plan {
  bool usable = false;  // false: no algorithm, or cuBLASLt refused it; the caller falls back
  cublasLtMatmulAlgo_t algo{};
};

std::mutex plan_mutex;
std::map<std::vector<std::int64_t>, Plan>& plans() {
  static std::map<std::vector<std::int64_t>, Plan> cache;
  return cache;
}

bool is_half(DType dtype) { return dtype == DType::BFloat16 || dtype == DType::Float16; }

}  // namespace

cudaDataType lt_data_type(const char* op, DType dtype) {
  switch (dtype) {
    case DType::Float64: return CUDA_R_64F;
    case DType::Float32: return CUDA_R_32F;
    case DType::BFloat16: return CUDA_R_16BF;
    case DType::Float16: return CUDA_R_16F;
    default: throw DTypeError(std::string(op) + ": no CUDA kernel for " + dtype_name(dtype));
  }
}

std::uint32_t pointer_alignment(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  std::uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

LtMatmulDesc::LtMatmulDesc(DType dtype) {
  const bool is_double = dtype == DType::Float64;
  SUBLET_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, is_double ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                                               is_double ? CUDA_R_64F : CUDA_R_32F));
}

LtMatmulDesc::~LtMatmulDesc() { cublasLtMatmulDescDestroy(desc); }

void LtMatmulDesc::set_attribute(cublasLtMatmulDescAttributes_t attribute, const void* value, std::size_t bytes) {
  SUBLET_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, value, bytes));
}

LtLayout::LtLayout(cudaDataType type, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  SUBLET_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<std::uint64_t>(rows),
                                                 static_cast<std::uint64_t>(cols), ld));
}

LtLayout::~LtLayout() { cublasLtMatrixLayoutDestroy(layout); }

bool lt_matmul(const Context& ctx, DType dtype, std::vector<std::int64_t> key, const LtProblem& p,
               const std::string& what) {
  memory::CudaDeviceGuard device(ctx.device);
  const std::size_t workspace_bytes = cublas_workspace_bytes(ctx.device.index);
  const std::uint32_t align_a = pointer_alignment(p.a_data), align_b = pointer_alignment(p.b_data),
                      align_d = pointer_alignment(p.d_data);
  key.insert(key.end(), {ctx.device.index, static_cast<std::int64_t>(dtype), align_a, align_b, align_d});

  Plan plan;
  {
    std::lock_guard<std::mutex> lock(plan_mutex);
    auto found = plans().find(key);
    if (found != plans().end()) {
      plan = found->second;
    } else {
      Preference pref;
      pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<std::uint64_t>(workspace_bytes));
      if (is_half(dtype)) {
        pref.set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                 static_cast<std::uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
      }
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a);
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b);
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d);
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d);
      cublasLtMatmulHeuristicResult_t result{};
      int returned = 0;
      const cublasStatus_t status =
          cublasLtMatmulAlgoGetHeuristic(lt_handle(ctx), p.desc.desc, p.a.layout, p.b.layout, p.d.layout, p.d.layout,
                                         pref.pref, 1, &result, &returned);
      plan.usable = status == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS;
      if (plan.usable) plan.algo = result.algo;
      plans().emplace(key, plan);
    }
  }
  if (!plan.usable) return false;

  const float alpha = 1.0f, beta = 0.0f;  // the scale type: float, or double for float64
  const double alpha_double = 1.0, beta_double = 0.0;
  const bool is_double = dtype == DType::Float64;
  memory::ScopedBlock workspace = ctx.workspace(workspace_bytes);
  const void* alpha_pointer = is_double ? static_cast<const void*>(&alpha_double) : &alpha;
  const void* beta_pointer = is_double ? static_cast<const void*>(&beta_double) : &beta;
  const cublasStatus_t status =
      cublasLtMatmul(lt_handle(ctx), p.desc.desc, alpha_pointer, p.a_data, p.a.layout, p.b_data, p.b.layout,
                     beta_pointer, p.d_data, p.d.layout, p.d_data, p.d.layout, &plan.algo, workspace.get(),
                     workspace_bytes, stream_of(ctx.stream));
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE) {
    // Refused before launching anything: remember it, and let the caller take the unfused way.
    std::lock_guard<std::mutex> lock(plan_mutex);
    plans()[key].usable = false;
    return false;
  }
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw CudaError("cublasLtMatmul failed for " + what + ": " + cublasGetStatusName(status) + " (" +
                    cublasGetStatusString(status) + ")");
  }
  return true;
}

}  // namespace sublet::ops::cuda
