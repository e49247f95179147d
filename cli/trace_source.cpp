#include "cli/trace_source.h"

#include <fmt/format.h>

#include <fstream>
#include <string_view>

#include "core/errors.h"
#include "memory/pickle_reader.h"
#include "memory/pytorch_snapshot.h"
#include "memory/replay.h"

namespace sublet::cli {
namespace {

bool starts_like_snapshot(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[2] = {};
  in.read(head, 2);
  const std::string_view bytes(head, static_cast<std::size_t>(in.gcount()));
  return memory::pickle::is_gzip(bytes) || memory::looks_like_pickle(bytes);
}

}  // namespace

TraceSource load_trace_source(const std::string& path, std::optional<int> device) {
  TraceSource out;
  if (!starts_like_snapshot(path)) {
    if (device)
      throw ValueError(fmt::format("--device {}: picks a device of a PyTorch snapshot, but {} is a sublet-alloc-trace, "
                                   "which records one allocator", *device, path));
    out.events = memory::load_trace(path);
    out.source = {{"kind", "sublet-trace"}, {"events", out.events.size()}, {"device", nullptr}};
    return out;
  }
  std::string bytes = memory::pickle::read_file_maybe_gzip(path);
  if (!memory::looks_like_pickle(bytes))
    throw IoError(path + ": gzip-compressed, but not a pickle of protocol 2 to 5 (a PyTorch snapshot); "
                         "sublet-alloc-trace files are read uncompressed");
  const memory::pickle::Document doc = memory::pickle::parse(std::move(bytes), path);
  memory::PytorchSnapshotTrace snapshot = memory::convert_pytorch_snapshot(doc, device.value_or(0), path);
  fmt::print("PyTorch snapshot {}: device {} of {}, {} trace entries -> {} events", path, snapshot.device,
             snapshot.device_count, snapshot.trace_entries, snapshot.events.size());
  fmt::print(" (empty_cache() calls: {}; cache releases inside allocations, left to each setting: {}).\n",
             snapshot.empty_cache_events, snapshot.internal_releases);
  if (snapshot.has_allocator_settings)
    fmt::print("Recorded allocator settings: PYTORCH_CUDA_ALLOC_CONF='{}', as SUBLET_ALLOC_CONF: '{}'.\n",
               snapshot.pytorch_alloc_conf, snapshot.alloc_conf);
  out.recorded_events = memory::with_recorded_releases(snapshot);  // before the events move out
  out.events = std::move(snapshot.events);
  out.recorded_segments = std::move(snapshot.segments);
  out.source = {{"kind", "pytorch-snapshot"}, {"events", out.events.size()}, {"device", snapshot.device}};
  out.recorded_alloc_conf = snapshot.alloc_conf;
  out.has_recorded_settings = snapshot.has_allocator_settings;
  return out;
}

}  // namespace sublet::cli
