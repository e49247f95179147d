#pragma once
// The C++ form of a training script's memory decorator:
//   { sublet::MemoryMonitor monitor("train_step"); ...; }
// resets the peak on entry and prints "[memory] train_step: peak 1.23 GiB, current 0.45 GiB"
// on scope exit.
#include <cstddef>
#include <functional>
#include <iosfwd>
#include <string>

#include "core/device.h"
#include "memory/registry.h"

namespace sublet {

class MemoryMonitor {
 public:
  explicit MemoryMonitor(std::string name, Device device = memory::default_device());
  MemoryMonitor(std::string name, Device device, std::ostream& out);
  ~MemoryMonitor();
  MemoryMonitor(const MemoryMonitor&) = delete;
  MemoryMonitor& operator=(const MemoryMonitor&) = delete;

  std::size_t peak_bytes() const;
  std::size_t current_bytes() const;
  std::string report() const;

 private:
  std::string name_;
  Device device_;
  std::ostream* out_;
};

}  // namespace sublet
