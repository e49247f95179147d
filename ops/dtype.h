#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace sublet {

enum class DType : std::uint8_t { Float32, Float64, Int64 };

inline std::size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
  }
  return 0;
}

inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
  }
  return "?";
}

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::Float32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::Float64; };
template <> struct DTypeOf<std::int64_t> { static constexpr DType value = DType::Int64; };

}  // namespace sublet
