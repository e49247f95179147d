#include "memory/stats.h"

namespace sublet::memory {
namespace {

constexpr const char* kTypeNames[kNumStatTypes] = {"all", "small_pool", "large_pool"};

void put(std::map<std::string, std::int64_t>& out, const std::string& name, const Stat& stat) {
  out[name + ".current"] = stat.current;
  out[name + ".peak"] = stat.peak;
  out[name + ".allocated"] = stat.allocated;
  out[name + ".freed"] = stat.freed;
}

void put(std::map<std::string, std::int64_t>& out, const std::string& family, const StatArray& stats) {
  for (std::size_t t = 0; t < kNumStatTypes; ++t) put(out, family + "." + kTypeNames[t], stats.by_type[t]);
}

template <typename F>
void for_each_family(DeviceStats& s, F f) {
  for (StatArray* a : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
                       &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes})
    for (Stat& stat : a->by_type) f(stat);
  f(s.oversize_allocations);
  f(s.oversize_segments);
}

}  // namespace

std::map<std::string, std::int64_t> DeviceStats::to_map() const {
  std::map<std::string, std::int64_t> out;
  put(out, "allocation", allocation);
  put(out, "segment", segment);
  put(out, "active", active);
  put(out, "inactive_split", inactive_split);
  put(out, "allocated_bytes", allocated_bytes);
  put(out, "reserved_bytes", reserved_bytes);
  put(out, "active_bytes", active_bytes);
  put(out, "inactive_split_bytes", inactive_split_bytes);
  put(out, "requested_bytes", requested_bytes);
  put(out, "oversize_allocations", oversize_allocations);
  put(out, "oversize_segments", oversize_segments);
  out["num_alloc_retries"] = num_alloc_retries;
  out["num_ooms"] = num_ooms;
  out["num_device_alloc"] = num_device_alloc;
  out["num_device_free"] = num_device_free;
  out["num_sync_all_streams"] = num_sync_all_streams;
  out["num_stream_ordered_reuses"] = num_stream_ordered_reuses;
  out["max_split_size"] = max_split_size;
  return out;
}

void DeviceStats::reset_peak() {
  for_each_family(*this, [](Stat& s) { s.reset_peak(); });
}

void DeviceStats::reset_accumulated() {
  for_each_family(*this, [](Stat& s) { s.reset_accumulated(); });
  num_alloc_retries = 0;
  num_ooms = 0;
  num_device_alloc = 0;
  num_device_free = 0;
  num_sync_all_streams = 0;
  num_stream_ordered_reuses = 0;
}

}  // namespace sublet::memory
