#pragma once
// The torchrun-like flags of `sublet train` and `sublet bench step`: with --nproc-per-node the
// process is a launcher that starts N workers on this node (one per GPU, or N CPU processes)
// running the same command (without these flags, with torchrun's variables); a process started
// with those variables is a worker.
#include <CLI/CLI.hpp>

#include <string>

#include "runtime/distributed/launch_env.h"

namespace sublet::cli {

struct LaunchFlags {
  distributed::LauncherConfig config;
  CLI::Option* nproc = nullptr;
  bool launching() const { return nproc && nproc->count() > 0; }
};

void add_launch_flags(CLI::App& command, LaunchFlags& flags);

// RANK or WORLD_SIZE is set: this process is a data-parallel worker.
bool launched_as_worker();

// Checks that this process may launch (not a worker itself; the CPU only when `cpu_workers`),
// starts the workers and returns their exit code (0, or the first failure's). CPU workers get
// OMP_NUM_THREADS = max(1, cores / N) unless it is set. The store token is the operator's
// SUBLET_STORE_TOKEN when set (required with --nnodes > 1), else a new random one. `command`
// names the subcommand in messages ("train", "bench step").
int launch_workers(const LaunchFlags& flags, const std::string& device, const std::string& command, bool cpu_workers);

}  // namespace sublet::cli
