#include "memory/oom_message.h"

#include <fmt/format.h>

#include <algorithm>

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

  text += waste_sentence(f.waste);

  // The kind of waste to address, when without the waste the request would have fit.
  std::string advice;
  const std::size_t wasted = f.waste.wasted();
  std::size_t headroom = f.device_info.free_bytes;
  if (f.memory_limit != 0) headroom = std::min(headroom, f.memory_limit - std::min(f.memory_limit, f.reserved_bytes));
  if (wasted != 0 && wasted + headroom >= f.requested_bytes)
    advice += waste_knob_advice(f.waste.largest(), f.waste, f.config, /*after_cache_release=*/true);
  if (f.memory_limit != 0 && f.reserved_bytes + f.requested_bytes > f.memory_limit &&
      f.device_info.free_bytes >= f.requested_bytes)
    advice += " The device itself has room: raise the memory fraction (set_memory_fraction).";
  if (advice.empty())
    advice = " Reduce the batch size or the model, or release tensors you no longer need; "
             "memory_summary() shows where the memory is.";
  return text + advice;
}

}  // namespace sublet::memory
