#include "cli/data_parallel_launch.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include "core/errors.h"
#include "memory/registry.h"
#include "runtime/distributed/worker_launcher.h"

namespace sublet::cli {

void add_launch_flags(CLI::App& command, LaunchFlags& flags) {
  distributed::LauncherConfig& c = flags.config;
  flags.nproc = command.add_option("--nproc-per-node", c.nproc_per_node,
                                   "data parallel: start N worker processes on this node (as torchrun): one per GPU, "
                                   "or N CPU processes with --device cpu")
                    ->check(CLI::Range(1, 1024));
  command.add_option("--nnodes", c.nnodes, "data parallel: nodes taking part")->check(CLI::Range(1, 65536))
      ->capture_default_str();
  command.add_option("--node-rank", c.node_rank, "data parallel: this node's rank")->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command.add_option("--master-addr", c.master_addr, "data parallel: where rank 0 serves the rendezvous store")
      ->capture_default_str();
  command.add_option("--master-port", c.master_port, "data parallel: the store's port")->capture_default_str();
}

bool launched_as_worker() {
  return distributed::launched_as_worker([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    return value ? std::optional<std::string>(value) : std::nullopt;
  });
}

namespace {

std::optional<std::string> process_variable(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  return value ? std::optional<std::string>(value) : std::nullopt;
}

// The cores this process may run on (its affinity mask: a container's or taskset's share).
int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

int launch_workers(const LaunchFlags& flags, const std::string& device, const std::string& command,
                   bool cpu_workers) {
  if (launched_as_worker())
    throw ValueError("--nproc-per-node starts workers, but this process already is one (RANK or WORLD_SIZE is set by "
                     "its launcher); drop --nproc-per-node when started by torchrun or SLURM");
  distributed::LauncherConfig config = flags.config;
  const bool on_cpu = device == "cpu" || (device == "auto" && !memory::cuda_available());
  if (on_cpu && !cpu_workers)
    throw DeviceError("--nproc-per-node: " + command + " runs data parallel on CUDA devices only; drop --nproc-per-node "
                      "to " + command + " on the CPU");
  if (!on_cpu && !memory::cuda_available())
    throw DeviceError("--nproc-per-node starts one process per GPU, and " +
                      std::string(memory::cuda_built() ? "no CUDA device is usable here"
                                                       : "this sublet was built without CUDA") +
                      "; pass --device cpu to train data-parallel on the CPU (Gloo)");
  if (on_cpu && !process_variable("OMP_NUM_THREADS")) {
    // The workers share this machine's cores, as torchrun's workers do (it sets 1).
    const int threads = std::max(1, usable_cores() / config.nproc_per_node);
    config.extra_environment.emplace_back("OMP_NUM_THREADS", std::to_string(threads));
  }
  config.store_token = distributed::launcher_store_token(config, process_variable);
  distributed::worker_launch_env(config, 0);  // ValueError for bad --nnodes, --node-rank or --master-port
  const int first_rank = config.node_rank * config.nproc_per_node;
  std::fprintf(stderr, "sublet %s: starting %d worker%s (ranks %d..%d of %d) on %s, store at %s:%u\n", command.c_str(),
               config.nproc_per_node, config.nproc_per_node == 1 ? "" : "s", first_rank,
               first_rank + config.nproc_per_node - 1, config.nnodes * config.nproc_per_node,
               on_cpu ? "the CPU" : "GPUs", config.master_addr.c_str(), static_cast<unsigned>(config.master_port));
  const auto result = distributed::run_workers(config, distributed::strip_launcher_flags(distributed::own_command_line()));
  if (result.exit_code != 0)
    std::fprintf(stderr, "sublet %s: worker rank %d (local rank %d) failed (exit status %d); the other workers were "
                 "stopped\n",
                 command.c_str(), first_rank + result.first_failed_rank, result.first_failed_rank, result.exit_code);
  return result.exit_code;
}

}  // namespace sublet::cli
