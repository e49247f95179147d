// The global norm on the CPU: one float64 accumulation over every element of every tensor, in
// list order (deterministic), and the clip scale in each tensor's dtype.
#include "ops/cpu/multi_tensor_norm_cpu.h"

#include <cstdint>

#include "core/errors.h"
#include "core/half.h"
#include "ops/multi_tensor_norm_math.h"

namespace sublet::ops::cpu {
namespace {

using norm_math::NormKind;

template <typename F>
void dispatch_element(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::BFloat16: return f(BFloat16{});
    case DType::Float16: return f(Float16{});
    default: throw DTypeError(std::string("multi_tensor_norm: no CPU kernel for ") + dtype_name(dtype));
  }
}

template <NormKind K>
double combined_terms(std::span<const NormTensor> tensors, double p) {
  double total = 0.0;
  for (const NormTensor& t : tensors) {
    dispatch_element(t.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(t.data);
      for (std::int64_t i = 0; i < t.numel; ++i) {
        total = norm_math::combine<K>(total, norm_math::term<K>(static_cast<double>(x[i]), p));
      }
    });
  }
  return total;
}

template <NormKind K>
double norm_of(std::span<const NormTensor> tensors, double p) {
  return norm_math::finish<K>(combined_terms<K>(tensors, p), p);
}

// The compute type of an element type: float for the 16-bit types, as their Tensor ops use.
template <typename T>
using Compute = std::conditional_t<std::is_same_v<T, double>, double, float>;

}  // namespace

template <typename N>
void multi_tensor_norm(const Context&, DType, std::span<const NormTensor> tensors, double norm_type, void* norm) {
  double value = 0.0;
  switch (norm_math::kind_of(norm_type)) {
    case NormKind::Squares: value = norm_of<NormKind::Squares>(tensors, norm_type); break;
    case NormKind::Abs: value = norm_of<NormKind::Abs>(tensors, norm_type); break;
    case NormKind::Pow: value = norm_of<NormKind::Pow>(tensors, norm_type); break;
    case NormKind::Max: value = norm_of<NormKind::Max>(tensors, norm_type); break;
  }
  *static_cast<N*>(norm) = static_cast<N>(value);
}

template <typename N>
void multi_tensor_clip_scale(const Context&, DType, std::span<const NormTensor> tensors, const void* norm,
                             double max_norm) {
  const N coefficient = norm_math::clip_coefficient<N>(*static_cast<const N*>(norm), max_norm);
  if (coefficient == N(1)) return;
  for (const NormTensor& t : tensors) {
    dispatch_element(t.dtype, [&](auto tag) {
      using T = decltype(tag);
      using C = Compute<T>;
      // The coefficient rounded to the tensor's dtype first, as g.mul_(scale.to(g.dtype())).
      const C scale = static_cast<C>(static_cast<T>(coefficient));
      T* x = static_cast<T*>(t.data);
      for (std::int64_t i = 0; i < t.numel; ++i) x[i] = static_cast<T>(static_cast<C>(x[i]) * scale);
    });
  }
}

template void multi_tensor_norm<float>(const Context&, DType, std::span<const NormTensor>, double, void*);
template void multi_tensor_norm<double>(const Context&, DType, std::span<const NormTensor>, double, void*);
template void multi_tensor_clip_scale<float>(const Context&, DType, std::span<const NormTensor>, const void*, double);
template void multi_tensor_clip_scale<double>(const Context&, DType, std::span<const NormTensor>, const void*, double);

}  // namespace sublet::ops::cpu
