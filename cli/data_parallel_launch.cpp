#include "cli/data_parallel_launch.h"

#include <cstdio>
#include <cstdlib>
#include <optional>

#include "core/errors.h"
#include "memory/registry.h"
#include "runtime/distributed/worker_launcher.h"

namespace sublet::cli {

void add_launch_flags(CLI::App& command, LaunchFlags& flags) {
  distributed::LauncherConfig& c = flags.config;
  flags.nproc = command.add_option("--nproc-per-node", c.nproc_per_node,
                                   "data parallel: start N worker processes, one per local GPU (as torchrun)")
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

int launch_workers(const LaunchFlags& flags, const std::string& device, const std::string& command) {
  if (launched_as_worker())
    throw ValueError("--nproc-per-node starts workers, but this process already is one (RANK or WORLD_SIZE is set by "
                     "its launcher); drop --nproc-per-node when started by torchrun or SLURM");
  if (device == "cpu")
    throw DeviceError("--nproc-per-node starts one process per GPU, and data parallel needs CUDA devices; --device cpu "
                      "cannot take part. Drop --nproc-per-node to " + command + " on the CPU");
  if (!memory::cuda_available())
    throw DeviceError("--nproc-per-node starts one process per GPU, and " +
                      std::string(memory::cuda_built() ? "no CUDA device is usable here"
                                                       : "this sublet was built without CUDA") +
                      ". Drop --nproc-per-node to " + command + " on the CPU");
  distributed::LauncherConfig config = flags.config;
  config.store_token = distributed::generate_store_token();
  distributed::worker_launch_env(config, 0);  // ValueError for bad --nnodes, --node-rank or --master-port
  std::fprintf(stderr, "sublet %s: starting %d worker%s (ranks %d..%d of %d), store at %s:%u\n", command.c_str(),
               config.nproc_per_node, config.nproc_per_node == 1 ? "" : "s", config.node_rank * config.nproc_per_node,
               (config.node_rank + 1) * config.nproc_per_node - 1, config.nnodes * config.nproc_per_node,
               config.master_addr.c_str(), static_cast<unsigned>(config.master_port));
  const auto result = distributed::run_workers(config, distributed::strip_launcher_flags(distributed::own_command_line()));
  if (result.exit_code != 0)
    std::fprintf(stderr, "sublet %s: worker %d failed (exit status %d); the other workers were stopped\n",
                 command.c_str(), result.first_failed_rank, result.exit_code);
  return result.exit_code;
}

}  // namespace sublet::cli
