#include "ops/captured_index_checks.h"

#include <string>
#include <utility>

#include "core/errors.h"

namespace sublet::ops {
namespace {

thread_local CapturedIndexChecks* installed = nullptr;

constexpr std::size_t kVerdictBytes = 2 * sizeof(std::int64_t);

}  // namespace

void CapturedIndexChecks::reserve(memory::CachingAllocator& allocator, StreamHandle stream, std::size_t capacity) {
  if (capacity <= capacity_) return;
  if (!checks_.empty())
    throw Error("CapturedIndexChecks::reserve: the captured checks hold verdicts in the room; clear() first");
  room_ = memory::ScopedBlock(allocator, capacity * kVerdictBytes, stream, memory::BlockCategory::Workspace);
  capacity_ = capacity;
}

std::int64_t* CapturedIndexChecks::add(memory::ScopedBlock device_scratch, OutOfRangeReport report) {
  if (checks_.size() >= capacity_) {
    throw Error("a CUDA graph capture met index check " + std::to_string(checks_.size() + 1) +
                ", and its verdicts have room for " + std::to_string(capacity_) +
                " (CapturedIndexChecks::reserve, before the capture)");
  }
  auto* verdict = static_cast<std::int64_t*>(room_.get()) + 2 * checks_.size();
  verdict[0] = -1;  // no replay yet: nothing to report
  verdict[1] = 0;
  checks_.push_back({std::move(device_scratch), verdict, std::move(report)});
  return verdict;
}

void CapturedIndexChecks::throw_first_failure() const {
  for (const Check& check : checks_) {
    // Written by the replay's last kernel of this check; volatile: the device wrote it, not this thread.
    const volatile std::int64_t* verdict = check.verdict;
    if (verdict[0] < 0) continue;
    check.report(OutOfRange{.position = verdict[0], .value = verdict[1]});
  }
}

CapturedIndexChecks* captured_index_checks() { return installed; }

CapturedIndexChecksScope::CapturedIndexChecksScope(CapturedIndexChecks& checks) : previous_(installed) {
  installed = &checks;
}

CapturedIndexChecksScope::~CapturedIndexChecksScope() { installed = previous_; }

}  // namespace sublet::ops
