#pragma once
// A recorded allocation history to replay: sizes and order as a program produced them.
//
// File format (JSON), the same as analysis/replay's "sublet-alloc-trace" so that a trace saved by
// the runtime replays here unchanged:
//   {"format": "sublet-alloc-trace", "version": 1,
//    "events": [{"action": "alloc", "id": 1, "size": 4096},
//               {"action": "free",  "id": 1}, ...]}
// or just the "events" list on its own. "id" pairs a free with its alloc and may be reused once
// freed; "size" is the requested byte count (> 0) of an alloc and is ignored on a free; other
// keys (e.g. "stream") are ignored: the benchmark replays on one stream. Blocks still live at the
// end are allowed (a training step keeps its parameters); each replay pass frees them at its end,
// so that every alloc is one pair and every pass starts from the same state.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sublet::bench {

struct ReplayEvent {
  enum class Action : std::uint8_t { Alloc, Free };
  Action action = Action::Alloc;
  std::uint32_t slot = 0;  // dense index standing for the file's id, for a flat handle table
  std::size_t size = 0;    // alloc only
};

struct ReplayHistory {
  std::string source;  // the file it came from
  std::vector<ReplayEvent> events;
  std::size_t slot_count = 0;   // distinct ids
  std::size_t alloc_count = 0;
  std::uint64_t peak_live_bytes = 0;  // requested bytes live at once, at most
};

// Throws IoError naming the file (and the event, counted from 0) when it cannot be read, is not
// JSON, or breaks a rule above: unknown action, missing or negative id or size, an alloc of a
// live id, a free of an id that is not live, or no alloc at all.
ReplayHistory load_history(const std::string& path);

}  // namespace sublet::bench
