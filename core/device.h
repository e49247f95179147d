#pragma once
#include <cstdint>
#include <string>

namespace sublet {

enum class DeviceType : std::uint8_t { CPU, CUDA };
inline constexpr int kNumDeviceTypes = 2;  // kernel tables have a row per device type

// Where a tensor's memory lives. A small value type: copy it freely.
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static constexpr Device cpu() { return Device{DeviceType::CPU, 0}; }
  static constexpr Device cuda(int index = 0) { return Device{DeviceType::CUDA, index}; }
  constexpr bool is_cpu() const { return type == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type == DeviceType::CUDA; }
  constexpr bool operator==(const Device&) const = default;
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
  // Parses "cpu", "cuda", "cuda:N"; throws ValueError naming the text otherwise.
  static Device parse(const std::string& text);
};

// A stream handle as the driver sees it (cudaStream_t on CUDA; nullptr is the default stream).
// The allocator never creates streams; it only keys free blocks by them.
using StreamHandle = void*;

}  // namespace sublet
