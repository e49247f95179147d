#include "memory/oom_message.h"

#include <fmt/format.h>

#include "core/format_bytes.h"

namespace sublet::memory {

std::string describe_out_of_memory(const OomFacts& f) {
  const auto b = [](std::size_t v) { return format_bytes(static_cast<std::int64_t>(v)); };
  const std::size_t unallocated = f.reserved_bytes - f.allocated_bytes;
  std::string text = fmt::format(
      "{} out of memory. Tried to allocate {}. The device has a total capacity of {} of which {} is free. "
      "Of the memory sublet holds, {} is allocated by tensors and {} is reserved but unallocated "
      "(largest free cached block {}; {:.0f}% of the free reserved memory lies outside it, i.e. is fragmented).",
      f.device.str(), b(f.requested_bytes), b(f.device_info.total_bytes), b(f.device_info.free_bytes),
      b(f.allocated_bytes), b(unallocated), b(f.largest_free_block), 100.0 * f.fragmentation);
  if (f.memory_limit != 0)
    text += fmt::format(" The per-process memory fraction caps sublet at {}.", b(f.memory_limit));

  std::string advice;
  const bool fragmented = unallocated >= f.requested_bytes && f.largest_free_block < f.requested_bytes;
  if (fragmented) {
    if (!f.config.expandable_segments)
      advice += " Reserved but unallocated memory would cover the request but is fragmented: try "
                "SUBLET_ALLOC_CONF=expandable_segments:True to avoid fragmentation.";
    if (!f.config.max_split_size_set() && !f.config.expandable_segments)
      advice += " Setting max_split_size_mb (e.g. max_split_size_mb:128) stops large cached blocks from being split.";
  }
  if (f.memory_limit != 0 && f.reserved_bytes + f.requested_bytes > f.memory_limit &&
      f.device_info.free_bytes >= f.requested_bytes)
    advice += " The device itself has room: raise the memory fraction (set_memory_fraction).";
  if (advice.empty())
    advice = " Reduce the batch size or the model, or release tensors you no longer need; "
             "memory_summary() shows where the memory is.";
  return text + advice;
}

}  // namespace sublet::memory
