#pragma once
// How sublet's OpenMP threads wait between parallel regions: one fixed choice, the same on a quiet
// and on a busy machine, so that a measurement measures one configuration. libgomp reads its
// variables once, when it is loaded (before main), so main() sets the default and runs the program
// again, once (cli/main.cpp).
//
// The default: a waiting thread spins for kDefaultSpinCount rounds, then sleeps. A passive policy
// (no spinning) puts a futex wake-up in front of every region and barrier, a little slower on an
// idle machine; longer spins (libgomp's own default is 100x this) take the core from whatever else
// runs, our own other thread included, and make a step much slower while another program keeps a
// core busy (bench/results/2026-12-07_cpu_thread_scaling/wait_policy_under_load.txt).
// OMP_WAIT_POLICY or GOMP_SPINCOUNT set by the user (even to an empty value) wins.
#include <optional>
#include <string>
#include <utility>

#include "core/tuning.h"

namespace sublet::cli {

inline constexpr const char* kSpinCountVariable = "GOMP_SPINCOUNT";
inline constexpr const char* kWaitPolicyVariable = "OMP_WAIT_POLICY";
inline constexpr const char* kDefaultSpinCount = "3000";

// The variable (name, value) to set before libgomp starts, or nullopt when the environment seen
// through `lookup` already chooses the wait policy. Depends on nothing else.
std::optional<std::pair<std::string, std::string>> openmp_wait_default(const EnvironmentLookup& lookup);

// The wait policy in force, for `sublet config`: OMP_WAIT_POLICY and GOMP_SPINCOUNT as the
// environment sets them ("" when unset) and a one-line description.
struct OpenMpWaitReport {
  std::string wait_policy, spin_count, description;
};
OpenMpWaitReport openmp_wait_report(const EnvironmentLookup& lookup);

}  // namespace sublet::cli
