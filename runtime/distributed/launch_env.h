#pragma once
// What a data-parallel worker learns from its launcher. The variables are torchrun's, so a
// worker started by torchrun, SLURM (with the usual export lines) or `sublet train
// --nproc-per-node` joins the same group; SUBLET_STORE_TOKEN is sublet's own: the secret every
// client presents to the rendezvous store (tcp_store.h).
//
// This is the one place that reads these variables (docs/architecture.md, "Configuration");
// everything else receives a LaunchEnv.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sublet::distributed {

inline constexpr const char* kStoreTokenVariable = "SUBLET_STORE_TOKEN";
// A token is compared in constant time, but a short one could still be guessed: 16 characters
// is 64 bits as hex, the least a launcher-made token (generate_store_token: 32 hex) exceeds.
inline constexpr std::size_t kMinStoreTokenChars = 16;

struct LaunchEnv {
  int rank = 0;              // RANK: this process among all, 0..world_size-1
  int local_rank = 0;        // LOCAL_RANK: this process on its node; the CUDA device index
  int world_size = 1;        // WORLD_SIZE
  int local_world_size = 1;  // LOCAL_WORLD_SIZE: processes on this node
  std::string master_addr;   // MASTER_ADDR: where rank 0 serves the store
  std::uint16_t master_port = 0;  // MASTER_PORT
  std::string store_token;   // SUBLET_STORE_TOKEN; see launch_env_from
  // torchrun: TORCHELASTIC_USE_AGENT_STORE=True means its agent serves PyTorch's TCPStore on
  // MASTER_PORT (no rank binds it; tcp_store.h); keys then go under the attempt's prefix
  // (TORCHELASTIC_RESTART_COUNT). torchelastic: TORCHELASTIC_RUN_ID is set (started by torchrun).
  bool agent_store = false;
  int restart_count = 0;
  bool torchelastic = false;
  std::string gloo_socket_ifname;  // GLOO_SOCKET_IFNAME: the interface Gloo's transport uses
  bool operator==(const LaunchEnv&) const = default;
};

// Looks a variable up: nullopt when it is not set (an empty value is "set to empty").
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// Reads and checks the variables. Throws ValueError naming the variable and its value for one
// that is missing, not a decimal integer in range, or contradicting another (RANK >= WORLD_SIZE,
// LOCAL_RANK >= LOCAL_WORLD_SIZE, LOCAL_WORLD_SIZE > WORLD_SIZE, MASTER_PORT outside 1..65535).
// SUBLET_STORE_TOKEN must be set (16..256 printable characters) when WORLD_SIZE > 1: another
// launcher's workers share no secret otherwise. With WORLD_SIZE == 1 it may be missing; the
// store then needs no second client and the caller may use generate_store_token(). Under
// torchrun no token is needed: with its agent store sublet serves none, and without it the
// workers agree on one made from TORCHELASTIC_RUN_ID and MASTER_PORT, which keeps other jobs'
// workers out but is no secret (PyTorch's own TCPStore has none either); set
// SUBLET_STORE_TOKEN where the network is not trusted.
LaunchEnv launch_env_from(const EnvLookup& lookup);
// launch_env_from over the process environment (getenv).
LaunchEnv launch_env_from_process();
// True when RANK or WORLD_SIZE is set: the process was started as a data-parallel worker.
bool launched_as_worker(const EnvLookup& lookup);

// The launcher's side: `--nproc-per-node N --nnodes M --node-rank R` as torchrun reads them.
struct LauncherConfig {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";  // torchrun's default for a single node
  std::uint16_t master_port = 29500;      // torchrun's default
  std::string store_token;                // the same for every worker of the job
  // Set in every worker's environment besides the rank variables (OMP_NUM_THREADS on the CPU).
  std::vector<std::pair<std::string, std::string>> extra_environment;
};

// The LaunchEnv of local worker `local_rank` (0..nproc_per_node-1) on node `node_rank`: ranks
// are assigned node by node, so RANK = node_rank * nproc_per_node + local_rank, as torchrun
// does with a static rendezvous. Throws ValueError for a config outside its ranges.
LaunchEnv worker_launch_env(const LauncherConfig& config, int local_rank);
// The variables to set in that worker's environment: those launch_env_from reads, plus
// GROUP_RANK (the node's rank) as torchrun sets it; in a fixed order.
std::vector<std::pair<std::string, std::string>> worker_environment(const LaunchEnv& env, int node_rank);

// The token a launcher gives its workers: the operator's SUBLET_STORE_TOKEN when set (checked as
// launch_env_from does), kept so that every node's launcher hands out the same one; else, on a
// single node, a new random one. ValueError when --nnodes > 1 and none is set: each node would
// make its own and rank 0's store would turn the other nodes away.
std::string launcher_store_token(const LauncherConfig& config, const EnvLookup& lookup);

// 32 hex characters (128 bits) from the operating system's random source (/dev/urandom).
// Throws IoError when that source cannot be read: a predictable token would be worse.
std::string generate_store_token();

}  // namespace sublet::distributed
