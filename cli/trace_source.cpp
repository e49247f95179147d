#include "cli/trace_source.h"

#include <fmt/format.h>


#include "analysis/pickle_reader.h"
#include "analysis/pytorch_snapshot.h"
#include "analysis/replay.h"
#include "core/errors.h"
#include "core/input_file.h"
#include "core/printable.h"

namespace sublet::cli {

TraceSource load_trace_source(const std::string& path, std::optional<int> device) {
  TraceSource out;
  // Opened once: a pipe or standard input cannot be read again. Its first byte tells a snapshot
  // (a pickle starts with 0x80, gzip with 0x1f) from a sublet-alloc-trace (JSON text).
  const io::InputHandle file = io::open_input(path, {.kind = io::InputKind::file_or_stream});
  const std::string name = path == "-" ? std::string("standard input") : path;
  const int first = std::getc(file.get());
  if (first != EOF) std::ungetc(first, file.get());
  if (first != 0x80 && first != 0x1f) {
    if (device)
      throw ValueError(fmt::format("--device {}: picks a device of a PyTorch snapshot, but {} is a sublet-alloc-trace, "
                                   "which records one allocator", *device, name));
    out.events = memory::read_trace(file.get(), name);
    out.source = {{"kind", "sublet-trace"}, {"events", out.events.size()}, {"device", nullptr}};
    return out;
  }
  std::string bytes = io::read_rest(file.get(), io::kMaxStreamInputBytes, name);
  const bool compressed = memory::pickle::is_gzip(bytes);
  if (compressed) bytes = memory::pickle::gunzip(bytes, name);
  if (!memory::looks_like_pickle(bytes))
    throw IoError(name + (compressed ? ": gzip-compressed, but not" : ": neither JSON nor") +
                  " a pickle of protocol 2 to 5 (a PyTorch snapshot); sublet-alloc-trace files are read uncompressed");
  const memory::pickle::Document doc = memory::pickle::parse(std::move(bytes), name);
  memory::PytorchSnapshotTrace snapshot = memory::convert_pytorch_snapshot(doc, device.value_or(0), name);
  fmt::print("PyTorch snapshot {}: device {} of {}, {} trace entries -> {} events", printable(name), snapshot.device,
             snapshot.device_count, snapshot.trace_entries, snapshot.events.size());
  fmt::print(" (empty_cache() calls: {}; cache releases inside allocations, left to each setting: {}).\n",
             snapshot.empty_cache_events, snapshot.internal_releases);
  // The recorded text comes from the file: escaped, so that it cannot drive the terminal.
  if (snapshot.has_allocator_settings)
    fmt::print("Recorded allocator settings: PYTORCH_CUDA_ALLOC_CONF='{}', as SUBLET_ALLOC_CONF: '{}'.\n",
               printable(snapshot.pytorch_alloc_conf), printable(snapshot.alloc_conf));
  out.recorded_events = memory::with_recorded_releases(snapshot);  // before the events move out
  out.events = std::move(snapshot.events);
  out.recorded_segments = std::move(snapshot.segments);
  out.source = {{"kind", "pytorch-snapshot"}, {"events", out.events.size()}, {"device", snapshot.device}};
  out.recorded_alloc_conf = snapshot.alloc_conf;
  out.has_recorded_settings = snapshot.has_allocator_settings;
  return out;
}

}  // namespace sublet::cli
