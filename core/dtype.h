#pragma once
// Element types and memory formats: the two tensor properties (besides the device) that pick a
// kernel from an op's kernel table (ops/kernel_table.h).
#include <cstddef>
#include <cstdint>

namespace sublet {

// BFloat16 and Float16 are storage types: kernels that take them accumulate in float32. UInt8
// is a storage type too (image bytes, masks; DLPack exchange): casts to and from it and fills.
enum class DType : std::uint8_t { Float32, Float64, Int64, BFloat16, Float16, UInt8 };
inline constexpr int kNumDTypes = 6;

constexpr std::size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::BFloat16: return 2;
    case DType::Float16: return 2;
    case DType::UInt8: return 1;
  }
  return 0;
}

constexpr const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
    case DType::UInt8: return "uint8";
  }
  return "?";
}

// How a 4-d (N, C, H, W) tensor lays its elements out: Contiguous is NCHW (W fastest),
// ChannelsLast is NHWC (C fastest), as torch.contiguous_format / torch.channels_last.
enum class MemoryFormat : std::uint8_t { Contiguous, ChannelsLast };
inline constexpr int kNumMemoryFormats = 2;

constexpr const char* memory_format_name(MemoryFormat format) {
  switch (format) {
    case MemoryFormat::Contiguous: return "contiguous";
    case MemoryFormat::ChannelsLast: return "channels_last";
  }
  return "?";
}

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::Float32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::Float64; };
template <> struct DTypeOf<std::int64_t> { static constexpr DType value = DType::Int64; };
template <> struct DTypeOf<std::uint8_t> { static constexpr DType value = DType::UInt8; };

}  // namespace sublet
