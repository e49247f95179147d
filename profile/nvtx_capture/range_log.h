#pragma once
// The ranges an NVTX injection library receives, kept in memory until the process ends: NVTX's
// two kinds, start/end ranges (an id, ended from any thread, may overlap) and push/pop ranges
// (a stack per thread). Thread-safe: module ranges are opened and closed by whichever thread runs
// a layer or its backward. Times are std::chrono::steady_clock nanoseconds.
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sublet::nvtx_capture {

struct CapturedRange {
  std::string name;
  bool pushed = false;       // push/pop (a thread's stack) rather than start/end
  int depth = 0;             // push/pop: the level on its thread's stack, 0 outermost
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  long start_thread = 0;     // OS thread ids (gettid), as Nsight Systems shows them
  long end_thread = 0;
  bool ended = false;
};

class RangeLog {
 public:
  // nvtxRangeStart*: the range's id, 1, 2, ... in the order the starts arrived.
  std::uint64_t start(std::string name);
  // nvtxRangeEnd: an unknown id or one already ended is counted, not recorded (nsys ignores it too).
  void end(std::uint64_t id);
  // nvtxRangePush*/Pop: the level of the range pushed or popped; Pop on an empty stack returns -1.
  int push(std::string name);
  int pop();

  // {"format": "sublet-nvtx-capture", "version": 1, "clock": "steady_clock", "pid", "ranges": [
  //   {"id", "name", "kind": "start_end"|"push_pop", "depth", "start_ns", "end_ns"|null,
  //    "start_thread", "end_thread"|null}, ...], "unmatched_ends"}
  nlohmann::json to_json() const;

 private:
  mutable std::mutex mutex_;
  std::vector<CapturedRange> ranges_;              // id - 1 indexes it
  std::map<long, std::vector<std::size_t>> stacks_;  // push/pop ranges still open, per thread
  std::uint64_t unmatched_ends_ = 0;
};

}  // namespace sublet::nvtx_capture
