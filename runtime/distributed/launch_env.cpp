#include "runtime/distributed/launch_env.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/errors.h"

namespace sublet::distributed {
namespace {

const char* kLaunchedBy = "(set by torchrun, `sublet train --nproc-per-node`, or your launcher)";

std::string required(const EnvLookup& lookup, const std::string& name) {
  auto value = lookup(name);
  if (!value) {
    throw ValueError("data-parallel worker: environment variable " + name + " is not set " + kLaunchedBy +
                     "; a worker needs RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT");
  }
  return *value;
}

// A decimal integer in [min, max] and nothing else: "3 ", "+3", "0x3" and "3.0" are refused,
// since a launcher that writes them is misconfigured and guessing would hide it.
long long parse_integer(const std::string& name, const std::string& text, long long min, long long max) {
  long long value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(begin, end, value);
  if (text.empty() || error != std::errc{} || stop != end || value < min || value > max) {
    throw ValueError("data-parallel worker: " + name + " must be a decimal integer in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "], got '" + text + "'");
  }
  return value;
}

int required_int(const EnvLookup& lookup, const std::string& name, int min) {
  return static_cast<int>(parse_integer(name, required(lookup, name), min, std::numeric_limits<int>::max()));
}

void check_token(const std::string& token, const std::string& source) {
  if (token.size() < kMinStoreTokenChars || token.size() > 256) {
    throw ValueError("data-parallel worker: " + source + " must be " + std::to_string(kMinStoreTokenChars) +
                     "..256 characters, got " + std::to_string(token.size()) +
                     " (use a random value, e.g. $(openssl rand -hex 16), the same on every worker)");
  }
  for (const char c : token) {
    if (c < 0x21 || c > 0x7e) {
      throw ValueError("data-parallel worker: " + source +
                       " must be printable ASCII without spaces (it is passed through environments)");
    }
  }
}

}  // namespace

LaunchEnv launch_env_from(const EnvLookup& lookup) {
  LaunchEnv env;
  env.world_size = required_int(lookup, "WORLD_SIZE", 1);
  env.rank = required_int(lookup, "RANK", 0);
  env.local_world_size = required_int(lookup, "LOCAL_WORLD_SIZE", 1);
  env.local_rank = required_int(lookup, "LOCAL_RANK", 0);
  env.master_addr = required(lookup, "MASTER_ADDR");
  env.master_port = static_cast<std::uint16_t>(parse_integer("MASTER_PORT", required(lookup, "MASTER_PORT"), 1, 65535));

  const auto pair = [](const char* a, int va, const char* b, int vb) {
    return std::string(a) + "=" + std::to_string(va) + " and " + b + "=" + std::to_string(vb);
  };
  if (env.rank >= env.world_size) {
    throw ValueError("data-parallel worker: RANK must be below WORLD_SIZE, got " +
                     pair("RANK", env.rank, "WORLD_SIZE", env.world_size));
  }
  if (env.local_rank >= env.local_world_size) {
    throw ValueError("data-parallel worker: LOCAL_RANK must be below LOCAL_WORLD_SIZE, got " +
                     pair("LOCAL_RANK", env.local_rank, "LOCAL_WORLD_SIZE", env.local_world_size));
  }
  if (env.local_world_size > env.world_size) {
    throw ValueError("data-parallel worker: LOCAL_WORLD_SIZE cannot exceed WORLD_SIZE, got " +
                     pair("LOCAL_WORLD_SIZE", env.local_world_size, "WORLD_SIZE", env.world_size));
  }
  if (env.master_addr.empty()) throw ValueError("data-parallel worker: MASTER_ADDR is set but empty");

  if (auto use_agent = lookup("TORCHELASTIC_USE_AGENT_STORE")) {
    if (*use_agent != "True" && *use_agent != "False")
      throw ValueError("data-parallel worker: TORCHELASTIC_USE_AGENT_STORE must be True or False, got '" + *use_agent + "'");
    env.agent_store = *use_agent == "True";
  }
  if (auto restarts = lookup("TORCHELASTIC_RESTART_COUNT"))
    env.restart_count = static_cast<int>(parse_integer("TORCHELASTIC_RESTART_COUNT", *restarts, 0, 1'000'000));
  const auto run_id = lookup("TORCHELASTIC_RUN_ID");
  env.torchelastic = run_id.has_value();
  if (auto ifname = lookup("GLOO_SOCKET_IFNAME")) env.gloo_socket_ifname = *ifname;

  if (auto token = lookup(kStoreTokenVariable)) {
    check_token(*token, kStoreTokenVariable);
    env.store_token = *token;
  } else if (env.torchelastic) {
    // Every worker of the job computes the same value; see launch_env.h for what it protects.
    env.store_token = "torchelastic/" + *run_id + "/" + std::to_string(env.master_port);
    check_token(env.store_token, "the store token made from TORCHELASTIC_RUN_ID");
  } else if (env.world_size > 1) {
    throw ValueError(std::string("data-parallel worker: ") + kStoreTokenVariable + " is not set; with WORLD_SIZE=" +
                     std::to_string(env.world_size) +
                     " every worker must present the same secret to the rendezvous store. `sublet train "
                     "--nproc-per-node` sets it; with another launcher export e.g. " +
                     kStoreTokenVariable + "=$(openssl rand -hex 16) once for the whole job");
  }
  return env;
}

LaunchEnv launch_env_from_process() {
  return launch_env_from([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  });
}

bool launched_as_worker(const EnvLookup& lookup) { return lookup("RANK").has_value() || lookup("WORLD_SIZE").has_value(); }

LaunchEnv worker_launch_env(const LauncherConfig& config, int local_rank) {
  const auto check = [](bool ok, const std::string& what) {
    if (!ok) throw ValueError("launcher: " + what);
  };
  check(config.nproc_per_node >= 1, "--nproc-per-node must be >= 1, got " + std::to_string(config.nproc_per_node));
  check(config.nnodes >= 1, "--nnodes must be >= 1, got " + std::to_string(config.nnodes));
  check(config.node_rank >= 0 && config.node_rank < config.nnodes,
        "--node-rank must be in [0, " + std::to_string(config.nnodes - 1) + "] for --nnodes " +
            std::to_string(config.nnodes) + ", got " + std::to_string(config.node_rank));
  check(static_cast<long long>(config.nproc_per_node) * config.nnodes <= std::numeric_limits<int>::max(),
        "--nproc-per-node times --nnodes overflows the rank range");
  check(local_rank >= 0 && local_rank < config.nproc_per_node,
        "local rank must be in [0, " + std::to_string(config.nproc_per_node - 1) + "], got " +
            std::to_string(local_rank));
  check(!config.master_addr.empty(), "--master-addr must not be empty");
  check(config.master_port != 0, "--master-port must be in 1..65535, got 0");
  check_token(config.store_token, "the store token");

  LaunchEnv env;
  env.rank = config.node_rank * config.nproc_per_node + local_rank;
  env.local_rank = local_rank;
  env.world_size = config.nnodes * config.nproc_per_node;
  env.local_world_size = config.nproc_per_node;
  env.master_addr = config.master_addr;
  env.master_port = config.master_port;
  env.store_token = config.store_token;
  return env;
}

std::vector<std::pair<std::string, std::string>> worker_environment(const LaunchEnv& env, int node_rank) {
  return {
      {"RANK", std::to_string(env.rank)},
      {"LOCAL_RANK", std::to_string(env.local_rank)},
      {"WORLD_SIZE", std::to_string(env.world_size)},
      {"LOCAL_WORLD_SIZE", std::to_string(env.local_world_size)},
      {"GROUP_RANK", std::to_string(node_rank)},
      {"MASTER_ADDR", env.master_addr},
      {"MASTER_PORT", std::to_string(env.master_port)},
      {kStoreTokenVariable, env.store_token},
  };
}

std::string launcher_store_token(const LauncherConfig& config, const EnvLookup& lookup) {
  if (auto token = lookup(kStoreTokenVariable)) {
    check_token(*token, kStoreTokenVariable);
    return *token;
  }
  if (config.nnodes > 1) {
    throw ValueError(std::string("launcher: --nnodes ") + std::to_string(config.nnodes) + " needs " + kStoreTokenVariable +
                     ", the same on every node (each node's launcher would otherwise make its own, and rank 0's store "
                     "would turn the other nodes' workers away): export " + kStoreTokenVariable +
                     "=$(openssl rand -hex 16) once and give every node that value");
  }
  return generate_store_token();
}

std::string generate_store_token() {
  unsigned char bytes[16];
  std::FILE* source = std::fopen("/dev/urandom", "rb");
  const bool ok = source && std::fread(bytes, 1, sizeof(bytes), source) == sizeof(bytes);
  if (source) std::fclose(source);
  if (!ok) throw IoError("launcher: cannot read 16 bytes from /dev/urandom for the store token");
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (const unsigned char b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 15]);
  }
  return token;
}

}  // namespace sublet::distributed
