#include "memory/monitor.h"

#include <fmt/format.h>

#include <iostream>

namespace sublet {

MemoryMonitor::MemoryMonitor(std::string name, Device device) : MemoryMonitor(std::move(name), device, std::cout) {}

MemoryMonitor::MemoryMonitor(std::string name, Device device, std::ostream& out)
    : name_(std::move(name)), device_(device), out_(&out) {
  reset_peak_memory_stats(device_);
}

MemoryMonitor::~MemoryMonitor() { *out_ << report() << '\n'; }

std::size_t MemoryMonitor::peak_bytes() const { return max_memory_allocated(device_); }
std::size_t MemoryMonitor::current_bytes() const { return memory_allocated(device_); }

std::string MemoryMonitor::report() const {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return fmt::format("[memory] {}: peak {:.3f} GiB, current {:.3f} GiB", name_,
                     static_cast<double>(peak_bytes()) / kGiB, static_cast<double>(current_bytes()) / kGiB);
}

}  // namespace sublet
