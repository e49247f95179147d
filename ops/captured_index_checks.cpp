#include "ops/captured_index_checks.h"

#include <utility>

namespace sublet::ops {
namespace {

thread_local CapturedIndexChecks* installed = nullptr;

}  // namespace

void CapturedIndexChecks::add(memory::ScopedBlock device_scratch, memory::ScopedBlock result, OutOfRangeReport report) {
  checks_.push_back({std::move(device_scratch), std::move(result), std::move(report)});
}

void CapturedIndexChecks::throw_first_failure() const {
  for (const Check& check : checks_) {
    // Written by the replay's last kernel of this check; volatile: the device wrote it, not this thread.
    const volatile std::int64_t* result = static_cast<const volatile std::int64_t*>(check.result.get());
    if (result[0] < 0) continue;
    check.report(OutOfRange{.position = result[0], .value = result[1]});
  }
}

CapturedIndexChecks* captured_index_checks() { return installed; }

CapturedIndexChecksScope::CapturedIndexChecksScope(CapturedIndexChecks& checks) : previous_(installed) {
  installed = &checks;
}

CapturedIndexChecksScope::~CapturedIndexChecksScope() { installed = previous_; }

}  // namespace sublet::ops
