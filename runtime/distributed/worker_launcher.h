#pragma once
// The launcher half of `sublet train --nproc-per-node N`, as torchrun's: starts N copies of a
// command on this node, each with the variables of its rank (worker_environment), waits for
// them, and stops the others when one fails, so that a dead rank never leaves its peers hanging
// in a collective.
#include <chrono>
#include <string>
#include <vector>

#include "runtime/distributed/launch_env.h"

namespace sublet::distributed {

struct WorkerExit {
  int local_rank = 0;
  int status = 0;       // exit code, or 128 + signal number when killed by a signal
  bool by_signal = false;
};

struct LaunchResult {
  int exit_code = 0;                // 0 when every worker exited 0, else the first failure's status
  std::vector<WorkerExit> exits;    // in the order the workers ended
  int first_failed_rank = -1;       // local rank of the first worker that failed; -1 if none
};

// Runs `argv` (argv[0] is the program's path) nproc_per_node times with each worker's variables
// added to this process's environment. When a worker fails, the others get SIGTERM, then SIGKILL
// after `grace`. Throws DistributedError when a worker cannot be started (the ones already
// started are stopped first) and ValueError for an empty argv.
LaunchResult run_workers(const LauncherConfig& config, const std::vector<std::string>& argv,
                         std::chrono::milliseconds grace = std::chrono::seconds(10));

// The command line minus the launcher's own flags (--nproc-per-node, --nnodes, --node-rank,
// --master-addr, --master-port, as "--flag value" or "--flag=value"): what each worker runs.
std::vector<std::string> strip_launcher_flags(const std::vector<std::string>& argv);

// This process's command line (/proc/self/cmdline), argv[0] replaced by /proc/self/exe's target
// so that workers run the same binary. IoError when it cannot be read.
std::vector<std::string> own_command_line();

}  // namespace sublet::distributed
