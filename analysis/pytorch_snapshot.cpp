// From a PyTorch snapshot's device trace to sublet TraceEvents (pytorch_snapshot.h).
//
// What the trace does not say directly:
// - empty_cache() leaves no entry of its own, only the segment_free/segment_unmap entries of the
//   cache it released. PyTorch's allocator releases cache in two other places, both inside an
//   allocation that found no free block: garbage collection and the retry after a failed
//   cudaMalloc. Those runs always end in that allocation's segment_alloc/segment_map (or an
//   oom). So a run of releases followed by anything else is taken as the program's
//   empty_cache() and becomes an EmptyCache event; a run followed by segment_alloc/segment_map/
//   oom is the allocator's own doing, which a replay under other settings must decide for itself,
//   and is dropped. (An empty_cache() right before an allocation that needs a new segment reads
//   as the latter: the trace cannot tell them apart.)
// - Whether the history is complete. PyTorch keeps the newest max_entries entries in a ring
//   buffer, and recording may start after the program allocated. Either way the replay would
//   start from an allocator that is not PyTorch's, so a free of an unknown block, an alloc
//   outside every segment the history created, or a release of memory it never reserved is an
//   error that says how to record a complete history.
#include "analysis/pytorch_snapshot.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <map>
#include <unordered_map>

#include "core/errors.h"
#include "core/printable.h"
#include "memory/config.h"

namespace sublet::memory {
namespace {

using pickle::Kind;
using pickle::Value;

constexpr std::size_t kMaxEntryKeys = 64;

// Device memory the history has reserved (segments and mapped pages), as disjoint ranges.
class ReservedRanges {
 public:
  void add(std::uint64_t start, std::uint64_t end) {
    if (start >= end) return;
    auto it = ranges_.upper_bound(start);
    if (it != ranges_.begin() && std::prev(it)->second >= start) {
      --it;
      start = it->first;
    }
    while (it != ranges_.end() && it->first <= end) {
      end = std::max(end, it->second);
      it = ranges_.erase(it);
    }
    ranges_[start] = end;
  }
  // False when [start, end) is not wholly reserved.
  bool remove(std::uint64_t start, std::uint64_t end) {
    if (start >= end) return contains(start);
    auto it = ranges_.upper_bound(start);
    if (it == ranges_.begin()) return false;
    --it;
    const auto [lo, hi] = *it;
    if (end > hi) return false;
    ranges_.erase(it);
    if (lo < start) ranges_[lo] = start;
    if (end < hi) ranges_[end] = hi;
    return true;
  }
  bool contains(std::uint64_t address) const {
    auto it = ranges_.upper_bound(address);
    return it != ranges_.begin() && std::prev(it)->second > address;
  }

 private:
  std::map<std::uint64_t, std::uint64_t> ranges_;  // start -> end
};

std::string hex(std::uint64_t v) { return fmt::format("0x{:x}", v); }


Value required(const Value& dict, std::string_view key) {
  const auto v = dict.find(key);
  if (!v) throw IoError(fmt::format("has no \"{}\"", key));
  return *v;
}

// A key's value read by `read`, its errors prefixed with the key.
template <class Read>
auto read_key(const Value& value, std::string_view key, Read read) {
  try {
    return read(value);
  } catch (const IoError& e) {
    throw IoError(fmt::format("\"{}\": {}", key, e.what()));
  }
}
std::uint64_t uint_key(const Value& dict, std::string_view key) {
  return read_key(required(dict, key), key, [](const Value& v) { return v.as_uint64(); });
}
std::string string_key(const Value& dict, std::string_view key) {
  return read_key(required(dict, key), key, [](const Value& v) { return std::string(v.as_string()); });
}

// Streams are cudaStream_t values written as int64 (older PyTorch) or uint64 (newer): keep the bits.
std::uint64_t stream_of(const Value& entry) {
  const auto stream = entry.find("stream");
  if (!stream) return 0;
  return read_key(*stream, "stream", [](const Value& v) {
    return v.kind() == Kind::Int ? static_cast<std::uint64_t>(v.as_int()) : v.as_uint64();
  });
}

// "1", "2", "4", ...: a decimal power of two; 0 otherwise.
std::uint64_t power_of_two_key(std::string_view key) {
  std::uint64_t n = 0;
  if (key.empty() || key.size() > 12) return 0;
  for (char c : key) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return std::has_single_bit(n) ? n : 0;
}

// allocator_settings -> a SUBLET_ALLOC_CONF string with the same meaning (same keys as PyTorch's).
void read_settings(const Value& settings, PytorchSnapshotTrace& out) {
  AllocatorConfig config;
  for (const char* key : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"})
    if (const auto v = settings.find(key); v && v->kind() == Kind::String) out.pytorch_alloc_conf = std::string(v->as_string());
  if (const auto v = settings.find("max_split_size")) {
    // Unlimited is SIZE_MAX, which PyTorch writes as int64 -1 (or as 2^64-1).
    const std::int64_t bytes = v->kind() == Kind::Int ? v->as_int() : -1;
    if (bytes > 0 && bytes != std::numeric_limits<std::int64_t>::max()) config.max_split_size = static_cast<std::size_t>(bytes);
  }
  if (const auto v = settings.find("expandable_segments"))
    config.expandable_segments = read_key(*v, "expandable_segments", [](const Value& x) { return x.as_bool(); });
  if (const auto v = settings.find("garbage_collection_threshold"))
    config.garbage_collection_threshold = read_key(*v, "garbage_collection_threshold", [](const Value& x) { return x.as_float(); });
  if (const auto v = settings.find("roundup_power2_divisions"); v && !v->is_none()) {
    // {"1": d0, "2": d1, "4": d2, ...}: key 2^i (MiB) holds interval i's divisions, as in sublet.
    read_key(*v, "roundup_power2_divisions", [&](const Value& dict) {
      for (std::size_t i = 0; i < dict.size(); ++i) {
        const Value key = dict.key_at(i);
        const std::uint64_t mib = key.kind() == Kind::String ? power_of_two_key(key.as_string()) : 0;
        const auto index = static_cast<std::size_t>(std::countr_zero(mib));
        if (mib == 0 || index >= AllocatorConfig::kRoundupIntervals)
          throw IoError("expected the keys \"1\", \"2\", \"4\", ... \"32768\"");
        const std::int64_t divisions = dict.value_at(i).as_int();
        config.roundup_power2_divisions[index] = divisions > 1 ? static_cast<std::size_t>(divisions) : 0;
      }
      return 0;
    });
  }
  try {
    config.validate();
  } catch (const ConfigError& e) {
    throw IoError(e.what());
  }
  // The uniform form when every interval has the same divisions, as users write it.
  const auto& d = config.roundup_power2_divisions;
  const bool uniform = std::all_of(d.begin(), d.end(), [&](std::size_t x) { return x == d[0]; });
  if (uniform && d[0] > 1) {
    AllocatorConfig without = config;
    without.roundup_power2_divisions.fill(0);
    const std::string rest = without.to_string();
    out.alloc_conf = fmt::format("roundup_power2_divisions:{}{}{}", d[0], rest.empty() ? "" : ",", rest);
  } else {
    out.alloc_conf = config.to_string();
  }
  out.has_allocator_settings = true;
}

class TraceConverter {
 public:
  TraceConverter(PytorchSnapshotTrace& out, const std::string& source) : out_(out), source_(source) {}

  void entry(const Value& e, std::size_t index) {
    index_ = index;
    const std::string action = string_key(e, "action");
    if (action == "alloc") {
      end_release_run(false);
      const std::uint64_t addr = uint_key(e, "addr");
      const std::uint64_t size = uint_key(e, "size");
      if (!reserved_.contains(addr)) not_from_empty(fmt::format("an alloc at {} outside every segment the history allocated", hex(addr)));
      const std::uint64_t id = next_id_++;
      const std::uint64_t stream = stream_of(e);
      if (!live_.emplace(addr, Live{id, stream}).second)
        throw IoError(fmt::format("alloc at {}, which is already allocated and not freed", hex(addr)));
      out_.events.push_back({.action = TraceEvent::Action::Alloc, .id = id, .size = static_cast<std::size_t>(size), .stream = stream});
    } else if (action == "free_requested" || action == "free_completed") {
      end_release_run(false);
      const std::uint64_t addr = uint_key(e, "addr");
      const auto it = live_.find(addr);
      if (it == live_.end()) not_from_empty(fmt::format("a {} of {}, a block the history never allocated", action, hex(addr)));
      // The block is reusable once the free completes (after the other streams' work on it).
      if (action == "free_completed") {
        out_.events.push_back({.action = TraceEvent::Action::Free, .id = it->second.id, .stream = it->second.stream});
        live_.erase(it);
      }
    } else if (action == "segment_alloc" || action == "segment_map") {
      end_release_run(true);
      const std::uint64_t addr = uint_key(e, "addr");
      const std::uint64_t size = uint_key(e, "size");
      reserved_.add(addr, addr + size);
      record_segment(action == "segment_map", addr, size);
    } else if (action == "segment_free" || action == "segment_unmap") {
      const std::uint64_t addr = uint_key(e, "addr");
      const std::uint64_t size = uint_key(e, "size");
      if (!reserved_.remove(addr, addr + size))
        not_from_empty(fmt::format("a {} of {} bytes at {} that the history never reserved", action, size, hex(addr)));
      in_release_run_ = true;
    } else if (action == "oom") {
      end_release_run(true);
    } else if (action != "snapshot") {
      throw IoError(fmt::format("unknown action '{}' (expected alloc, free_requested, free_completed, segment_alloc, "
                                "segment_free, segment_map, segment_unmap, snapshot or oom)", printable(action)));
    }
  }

  void finish() { end_release_run(false); }

 private:
  struct Live {
    std::uint64_t id;
    std::uint64_t stream;
  };

  void end_release_run(bool inside_allocation) {
    if (!in_release_run_) return;
    in_release_run_ = false;
    if (inside_allocation) {
      ++out_.internal_releases;
      out_.internal_release_positions.push_back(out_.events.size());
    } else {
      ++out_.empty_cache_events;
      out_.events.push_back({.action = TraceEvent::Action::EmptyCache});
    }
  }

  // An expandable segment reserves 1 1/8 of the device's memory of address space and maps pages
  // into it from its start; a map more than kExpandableWindow past every segment start seen so
  // far (these runs map far less) begins a new segment.
  void record_segment(bool map, std::uint64_t addr, std::uint64_t size) {
    constexpr std::uint64_t kExpandableWindow = std::uint64_t{64} << 30;
    if (!map) {
      out_.segments.device_allocs.push_back({addr, static_cast<std::size_t>(size)});
      return;
    }
    auto& bases = out_.segments.expandable_bases;
    if (std::none_of(bases.begin(), bases.end(), [&](std::uint64_t b) { return addr >= b && addr - b < kExpandableWindow; }))
      bases.push_back(addr);
  }

  [[noreturn]] void not_from_empty(const std::string& what) const {
    throw IoError(fmt::format(
        "{}: device {}'s history does not start from an empty allocator: entry {} is {}. PyTorch keeps only the newest "
        "max_entries events (its ring buffer overflowed), or recording started after memory was allocated; a replay "
        "of a partial history would start from the wrong state. Record from the start of the program with room for "
        "every event: torch.cuda.memory._record_memory_history(max_entries=N) with N above the run's allocator events "
        "(this history holds {} entries)",
        source_, out_.device, index_, what, out_.trace_entries));
  }

  PytorchSnapshotTrace& out_;
  const std::string& source_;
  std::unordered_map<std::uint64_t, Live> live_;  // address -> the block allocated there
  ReservedRanges reserved_;
  std::uint64_t next_id_ = 1;
  std::size_t index_ = 0;
  bool in_release_run_ = false;
};

}  // namespace

bool looks_like_pickle(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x80 && bytes[1] >= 2 && bytes[1] <= 5;
}

PytorchSnapshotTrace convert_pytorch_snapshot(const pickle::Document& snapshot, int device, const std::string& source) {
  const Value root = snapshot.root();
  if (root.kind() != Kind::Dict)
    throw IoError(fmt::format("{}: a pickle of a {}, not a PyTorch memory snapshot (the dict torch.cuda.memory._snapshot() returns)",
                              source, pickle::kind_name(root.kind())));
  const auto traces = root.find("device_traces");
  if (!traces) {
    if (root.find("segments"))
      throw IoError(source + ": a PyTorch memory snapshot without an allocation history (no \"device_traces\"): call "
                             "torch.cuda.memory._record_memory_history(max_entries=...) before the run, then _dump_snapshot");
    throw IoError(source + ": a pickle of a dict without \"device_traces\", not a PyTorch memory snapshot");
  }
  if (traces->kind() != Kind::List)
    throw IoError(fmt::format("{}: \"device_traces\" is a {}, expected a list with one trace per device", source,
                              pickle::kind_name(traces->kind())));
  PytorchSnapshotTrace out;
  out.device = device;
  out.device_count = static_cast<int>(std::min<std::size_t>(traces->size(), std::numeric_limits<int>::max()));
  if (device < 0 || static_cast<std::size_t>(device) >= traces->size())
    throw IoError(fmt::format("{}: device {} is out of range: the snapshot has device traces for {} device(s), 0 to {}", source,
                              device, traces->size(), static_cast<long long>(traces->size()) - 1));
  const std::string where = fmt::format("{}: device_traces[{}]", source, device);
  const Value trace = traces->at(static_cast<std::size_t>(device));
  if (trace.kind() != Kind::List) throw IoError(fmt::format("{} is a {}, expected a list of entries", where, pickle::kind_name(trace.kind())));
  out.trace_entries = trace.size();
  if (out.trace_entries == 0) {
    std::string others;
    for (std::size_t d = 0; d < traces->size(); ++d)
      if (traces->at(d).kind() == Kind::List && traces->at(d).size() > 0) others += (others.empty() ? "" : ", ") + std::to_string(d);
    throw IoError(fmt::format("{}: device {} has no allocation history{}: record one with "
                              "torch.cuda.memory._record_memory_history(max_entries=...) before the run",
                              source, device, others.empty() ? "" : " (devices with one: " + others + "; pick with --device)"));
  }

  if (const auto settings = root.find("allocator_settings"); settings && !settings->is_none()) {
    try {
      read_settings(*settings, out);
    } catch (const IoError& e) {
      throw IoError(fmt::format("{}: allocator_settings: {}", source, e.what()));
    }
  }

  TraceConverter converter(out, source);
  for (std::size_t i = 0; i < out.trace_entries; ++i) {
    const Value entry = trace.at(i);
    try {
      if (entry.kind() != Kind::Dict) throw IoError(fmt::format("is a {}, expected a dict", pickle::kind_name(entry.kind())));
      // Keys are found by a linear search: a huge entry (shared by memo across the whole trace)
      // would make that quadratic in the input, and PyTorch's entries have fewer than 10 keys.
      if (entry.size() > kMaxEntryKeys)
        throw IoError(fmt::format("is a dict of {} items; a PyTorch trace entry has at most {}", entry.size(), kMaxEntryKeys));
      converter.entry(entry, i);
    } catch (const IoError& e) {
      const std::string what = e.what();
      if (what.starts_with(source + ":")) throw;  // already a whole message
      throw IoError(fmt::format("{}[{}]: {}", where, i, what));
    }
  }
  converter.finish();
  return out;
}

std::vector<TraceEvent> with_recorded_releases(const PytorchSnapshotTrace& trace) {
  std::vector<TraceEvent> out;
  out.reserve(trace.events.size() + trace.internal_release_positions.size());
  std::size_t next = 0;
  for (std::size_t i = 0; i <= trace.events.size(); ++i) {
    for (; next < trace.internal_release_positions.size() && trace.internal_release_positions[next] == i; ++next)
      out.push_back({.action = TraceEvent::Action::EmptyCache});
    if (i < trace.events.size()) out.push_back(trace.events[i]);
  }
  return out;
}

PytorchSnapshotTrace load_pytorch_snapshot(const std::string& path, int device) {
  const pickle::Document doc = pickle::parse(pickle::read_file_maybe_gzip(path), path);
  return convert_pytorch_snapshot(doc, device, path);
}

}  // namespace sublet::memory
