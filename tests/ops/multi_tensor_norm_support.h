#pragma once
// Tensor lists for the multi-tensor norm tests (ops/multi_tensor_norm.h): host arrays of mixed
// dtypes filled with seeded random values, their values as float64, and an independent float64
// (long double sums) reference of the global norm and of the clip scale.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "ops/multi_tensor_norm.h"

namespace sublet::ops::testing {

// One host array: `numel` elements of `dtype` (float32, float64, bfloat16, float16) in bytes.
struct HostArray {
  DType dtype = DType::Float32;
  std::int64_t numel = 0;
  std::vector<unsigned char> bytes;

  void* data() { return bytes.data(); }
  double at(std::int64_t i) const {
    const unsigned char* p = bytes.data();
    switch (dtype) {
      case DType::Float64: return reinterpret_cast<const double*>(p)[i];
      case DType::BFloat16: return static_cast<double>(static_cast<float>(reinterpret_cast<const BFloat16*>(p)[i]));
      case DType::Float16: return static_cast<double>(static_cast<float>(reinterpret_cast<const Float16*>(p)[i]));
      default: return reinterpret_cast<const float*>(p)[i];
    }
  }
  void set(std::int64_t i, double v) {
    unsigned char* p = bytes.data();
    switch (dtype) {
      case DType::Float64: reinterpret_cast<double*>(p)[i] = v; break;
      case DType::BFloat16: reinterpret_cast<BFloat16*>(p)[i] = BFloat16(static_cast<float>(v)); break;
      case DType::Float16: reinterpret_cast<Float16*>(p)[i] = Float16(static_cast<float>(v)); break;
      default: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); break;
    }
  }
};

// Uniform values in [-scale, scale), rounded to the dtype, never all zeros.
inline HostArray random_array(DType dtype, std::int64_t numel, std::uint64_t seed, double scale = 1.0) {
  HostArray a{dtype, numel, std::vector<unsigned char>(static_cast<std::size_t>(numel) * element_size(dtype))};
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  for (std::int64_t i = 0; i < numel; ++i) a.set(i, dist(engine));
  return a;
}

inline std::vector<NormTensor> norm_tensors(std::vector<HostArray>& arrays) {
  std::vector<NormTensor> out;
  for (HostArray& a : arrays) out.push_back({a.data(), a.numel, a.dtype});
  return out;
}

// The norm of all values, summed in long double: (sum |x|^p)^(1/p), or max |x|.
inline double reference_norm(const std::vector<HostArray>& arrays, double p) {
  long double acc = 0;
  for (const HostArray& a : arrays) {
    for (std::int64_t i = 0; i < a.numel; ++i) {
      const double x = std::fabs(a.at(i));
      if (std::isinf(p)) {
        acc = std::isnan(x) || x > acc ? x : acc;
      } else {
        acc += p == 2.0 ? static_cast<long double>(x) * x : std::pow(static_cast<long double>(x), p);
      }
    }
  }
  return std::isinf(p) ? static_cast<double>(acc) : static_cast<double>(std::pow(acc, 1.0L / p));
}

// The clip coefficient written out as PyTorch computes it in the norm's dtype N:
// (1 / (norm + 1e-6)) * max_norm, at most 1.
template <typename N>
N reference_coefficient(N norm, double max_norm) {
  const N c = (N(1) / (norm + static_cast<N>(1e-6))) * static_cast<N>(max_norm);
  return std::isnan(c) || c < N(1) ? c : N(1);
}

// An element scaled as Tensor::mul_ by the coefficient converted to the element's dtype:
// the product in float32 for the 16-bit types and float32, in float64 for float64.
inline double reference_scaled(DType dtype, double x, double coefficient) {
  switch (dtype) {
    case DType::Float64: return x * coefficient;
    case DType::BFloat16: {
      const float c = static_cast<float>(BFloat16(static_cast<float>(coefficient)));
      return static_cast<float>(BFloat16(static_cast<float>(x) * c));
    }
    case DType::Float16: {
      const float c = static_cast<float>(Float16(static_cast<float>(coefficient)));
      return static_cast<float>(Float16(static_cast<float>(x) * c));
    }
    default: return static_cast<float>(x) * static_cast<float>(coefficient);
  }
}

// Exact equality of two values, a NaN equal to any NaN.
inline bool same_value(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace sublet::ops::testing
