// Arbitrary bytes as a sublet-alloc-trace file: a valid trace (whose events pair every free with
// a live alloc, and which replays without error) or an IoError, never a crash, a hang or another
// exception.
#include <cstdint>
#include <unordered_set>

#include "analysis/replay.h"
#include "core/errors.h"
#include "fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto path = sublet::fuzz::scratch_file("-alloc-trace");
  sublet::fuzz::write_input(path, data, size);
  std::vector<sublet::memory::TraceEvent> events;
  try {
    events = sublet::memory::load_trace(path.string());
  } catch (const sublet::IoError&) {
    return 0;
  }
  std::unordered_set<std::uint64_t> live;
  for (const auto& e : events) {
    if (e.action == sublet::memory::TraceEvent::Action::Alloc && !live.insert(e.id).second) std::abort();
    if (e.action == sublet::memory::TraceEvent::Action::Free && live.erase(e.id) != 1) std::abort();
  }
  // Sizes are arbitrary: a 64 MiB simulated device refuses the large ones (OOM is an answer).
  sublet::memory::replay_trace(events, "", std::size_t{64} << 20);
  return 0;
}
