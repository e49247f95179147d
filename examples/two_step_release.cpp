#include "examples/two_step_release.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <ostream>

#include "core/format_bytes.h"
#include "memory/registry.h"

namespace sublet::examples {
namespace {

void print_row(std::ostream& out, memory::CachingAllocator& allocator, const std::string& step, const std::string& note) {
  const auto stats = allocator.memory_stats();
  fmt::print(out, "{:<34} {:>18} {:>18} {:>12}   {}\n", step,
             sublet::format_bytes(static_cast<std::int64_t>(allocator.memory_allocated())),
             sublet::format_bytes(static_cast<std::int64_t>(allocator.memory_reserved())),
             stats.at("num_device_alloc"), note);
}

}  // namespace

int two_step_release_demo(Device device, std::size_t buffer_bytes, std::ostream& out) {
  memory::CachingAllocator& allocator = memory::allocator_for(device);
  allocator.empty_cache();
  allocator.reset_peak_memory_stats();
  allocator.reset_accumulated_memory_stats();
  fmt::print(out, "Two-step release on {} ({} backend), buffer of {}\n\n", device.str(),
             allocator.backend().name(), sublet::format_bytes(static_cast<std::int64_t>(buffer_bytes)));
  fmt::print(out, "{:<34} {:>18} {:>18} {:>12}\n", "step", "memory_allocated", "memory_reserved", "device allocs");
  print_row(out, allocator, "start", "");

  memory::Block* buffer = allocator.allocate(buffer_bytes);
  print_row(out, allocator, "allocate the buffer", "the sub-landlord rents a segment from the device");
  allocator.free(buffer);
  print_row(out, allocator, "free it (last reference gone)", "step 1: allocated drops; step 2: the block stays cached");
  buffer = allocator.allocate(buffer_bytes);
  print_row(out, allocator, "allocate the same size again", "served from the cache: no new device allocation");
  allocator.free(buffer);
  print_row(out, allocator, "free it again", "");
  allocator.empty_cache();
  print_row(out, allocator, "empty_cache()", "the segment goes back to the device");

  fmt::print(out, "\nPeak allocated {}, peak reserved {}.\n",
             sublet::format_bytes(static_cast<std::int64_t>(allocator.max_memory_allocated())),
             sublet::format_bytes(static_cast<std::int64_t>(allocator.max_memory_reserved())));
  out << allocator.memory_summary();
  return 0;
}

}  // namespace sublet::examples
