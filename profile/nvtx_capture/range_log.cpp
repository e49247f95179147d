#include "profile/nvtx_capture/range_log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>

namespace sublet::nvtx_capture {

namespace {
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
long this_thread() { return static_cast<long>(::syscall(SYS_gettid)); }
}  // namespace

std::uint64_t RangeLog::start(std::string name) {
  CapturedRange range{.name = std::move(name), .start_ns = now_ns(), .start_thread = this_thread()};
  std::lock_guard lock(mutex_);
  ranges_.push_back(std::move(range));
  return ranges_.size();
}

void RangeLog::end(std::uint64_t id) {
  const std::int64_t t = now_ns();
  std::lock_guard lock(mutex_);
  if (id == 0 || id > ranges_.size() || ranges_[id - 1].ended || ranges_[id - 1].pushed) {
    ++unmatched_ends_;
    return;
  }
  CapturedRange& range = ranges_[id - 1];
  range.end_ns = t;
  range.end_thread = this_thread();
  range.ended = true;
}

int RangeLog::push(std::string name) {
  const long thread = this_thread();
  CapturedRange range{.name = std::move(name), .pushed = true, .start_ns = now_ns(), .start_thread = thread};
  std::lock_guard lock(mutex_);
  std::vector<std::size_t>& stack = stacks_[thread];
  range.depth = static_cast<int>(stack.size());
  stack.push_back(ranges_.size());
  ranges_.push_back(std::move(range));
  return static_cast<int>(stack.size()) - 1;
}

int RangeLog::pop() {
  const std::int64_t t = now_ns();
  const long thread = this_thread();
  std::lock_guard lock(mutex_);
  std::vector<std::size_t>& stack = stacks_[thread];
  if (stack.empty()) {
    ++unmatched_ends_;
    return -1;
  }
  CapturedRange& range = ranges_[stack.back()];
  stack.pop_back();
  range.end_ns = t;
  range.end_thread = thread;
  range.ended = true;
  return range.depth;
}

nlohmann::json RangeLog::to_json() const {
  std::lock_guard lock(mutex_);
  nlohmann::json ranges = nlohmann::json::array();
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    const CapturedRange& r = ranges_[i];
    ranges.push_back({{"id", i + 1},
                      {"name", r.name},
                      {"kind", r.pushed ? "push_pop" : "start_end"},
                      {"depth", r.depth},
                      {"start_ns", r.start_ns},
                      {"end_ns", r.ended ? nlohmann::json(r.end_ns) : nlohmann::json(nullptr)},
                      {"start_thread", r.start_thread},
                      {"end_thread", r.ended ? nlohmann::json(r.end_thread) : nlohmann::json(nullptr)}});
  }
  return {{"format", "sublet-nvtx-capture"}, {"version", 1},        {"clock", "steady_clock"},
          {"pid", ::getpid()},               {"ranges", std::move(ranges)}, {"unmatched_ends", unmatched_ends_}};
}

}  // namespace sublet::nvtx_capture
