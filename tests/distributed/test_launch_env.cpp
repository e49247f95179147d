// The launcher's environment: torchrun's variables read into a LaunchEnv, the errors for
// missing, non-numeric and contradictory values, and the launcher's inverse.
#include "runtime/distributed/launch_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

#include "core/errors.h"

namespace {

using sublet::ValueError;
using namespace sublet::distributed;

const std::string kToken = "0123456789abcdef0123";

std::map<std::string, std::string> valid_env() {
  return {{"RANK", "3"},           {"LOCAL_RANK", "1"},       {"WORLD_SIZE", "4"},
          {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"},
          {"SUBLET_STORE_TOKEN", kToken}};
}

EnvLookup lookup_in(const std::map<std::string, std::string>& env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    const auto found = env.find(name);
    if (found == env.end()) return std::nullopt;
    return found->second;
  };
}

// The message of the ValueError that reading `env` throws ("" if none is thrown).
std::string error_for(const std::map<std::string, std::string>& env) {
  try {
    launch_env_from(lookup_in(env));
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchEnv, ReadsTorchrunVariables) {
  const LaunchEnv env = launch_env_from(lookup_in(valid_env()));
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "node0");
  EXPECT_EQ(env.master_port, 29500);
  EXPECT_EQ(env.store_token, kToken);
}

TEST(LaunchEnv, MissingVariableIsNamed) {
  for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    auto env = valid_env();
    env.erase(name);
    const std::string message = error_for(env);
    EXPECT_NE(message.find(std::string(name) + " is not set"), std::string::npos) << name << ": " << message;
  }
}

TEST(LaunchEnv, NonNumericValuesAreRefusedWithTheirText) {
  for (const char* bad : {"", "abc", "3 ", " 3", "+3", "0x3", "3.0", "-1", "99999999999999999999"}) {
    auto env = valid_env();
    env["RANK"] = bad;
    const std::string message = error_for(env);
    EXPECT_NE(message.find("RANK must be a decimal integer"), std::string::npos) << "'" << bad << "': " << message;
    EXPECT_NE(message.find("got '" + std::string(bad) + "'"), std::string::npos) << message;
  }
  auto env = valid_env();
  env["MASTER_PORT"] = "70000";
  EXPECT_NE(error_for(env).find("MASTER_PORT must be a decimal integer in [1, 65535], got '70000'"), std::string::npos);
  env["MASTER_PORT"] = "0";
  EXPECT_NE(error_for(env).find("MASTER_PORT"), std::string::npos);
  env = valid_env();
  env["WORLD_SIZE"] = "0";
  EXPECT_NE(error_for(env).find("WORLD_SIZE must be a decimal integer in [1,"), std::string::npos);
}

TEST(LaunchEnv, ContradictoryValuesAreRefused) {
  auto env = valid_env();
  env["RANK"] = "4";
  EXPECT_NE(error_for(env).find("RANK must be below WORLD_SIZE, got RANK=4 and WORLD_SIZE=4"), std::string::npos)
      << error_for(env);
  env = valid_env();
  env["LOCAL_RANK"] = "2";
  EXPECT_NE(error_for(env).find("LOCAL_RANK must be below LOCAL_WORLD_SIZE, got LOCAL_RANK=2 and LOCAL_WORLD_SIZE=2"),
            std::string::npos);
  env = valid_env();
  env["LOCAL_WORLD_SIZE"] = "8";
  env["LOCAL_RANK"] = "1";
  EXPECT_NE(error_for(env).find("LOCAL_WORLD_SIZE cannot exceed WORLD_SIZE"), std::string::npos);
  env = valid_env();
  env["MASTER_ADDR"] = "";
  EXPECT_NE(error_for(env).find("MASTER_ADDR is set but empty"), std::string::npos);
}

TEST(LaunchEnv, TokenIsRequiredForSeveralRanksOnly) {
  auto env = valid_env();
  env.erase("SUBLET_STORE_TOKEN");
  EXPECT_NE(error_for(env).find("SUBLET_STORE_TOKEN is not set; with WORLD_SIZE=4"), std::string::npos);

  env = {{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_WORLD_SIZE", "1"},
         {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1234"}};
  EXPECT_EQ(error_for(env), "");
  EXPECT_EQ(launch_env_from(lookup_in(env)).store_token, "");

  env = valid_env();
  env["SUBLET_STORE_TOKEN"] = "short";
  EXPECT_NE(error_for(env).find("SUBLET_STORE_TOKEN must be 16..256 characters, got 5"), std::string::npos);
  env["SUBLET_STORE_TOKEN"] = "0123456789 abcdef";
  EXPECT_NE(error_for(env).find("printable ASCII without spaces"), std::string::npos);
}

TEST(LaunchEnv, TorchrunsVariablesNeedNoToken) {
  auto env = valid_env();
  env.erase("SUBLET_STORE_TOKEN");
  env["TORCHELASTIC_RUN_ID"] = "job-7";
  env["TORCHELASTIC_RESTART_COUNT"] = "2";
  env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  const LaunchEnv agent = launch_env_from(lookup_in(env));
  EXPECT_TRUE(agent.agent_store);
  EXPECT_TRUE(agent.torchelastic);
  EXPECT_EQ(agent.restart_count, 2);
  // Without the agent store rank 0 serves sublet's store: every worker derives the same token.
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  const LaunchEnv own = launch_env_from(lookup_in(env));
  EXPECT_FALSE(own.agent_store);
  EXPECT_EQ(own.store_token, "torchelastic/job-7/29500");
  // An operator's token wins over the derived one.
  env["SUBLET_STORE_TOKEN"] = kToken;
  EXPECT_EQ(launch_env_from(lookup_in(env)).store_token, kToken);
  env["TORCHELASTIC_USE_AGENT_STORE"] = "yes";
  EXPECT_NE(error_for(env).find("TORCHELASTIC_USE_AGENT_STORE must be True or False, got 'yes'"), std::string::npos);
}

TEST(LaunchEnv, ALauncherKeepsTheOperatorsTokenAndNeedsOneForSeveralNodes) {
  LauncherConfig config;
  EXPECT_EQ(launcher_store_token(config, lookup_in({{"SUBLET_STORE_TOKEN", kToken}})), kToken);
  EXPECT_EQ(launcher_store_token(config, lookup_in({})).size(), 32u);  // a new random one
  config.nnodes = 2;
  EXPECT_EQ(launcher_store_token(config, lookup_in({{"SUBLET_STORE_TOKEN", kToken}})), kToken);
  try {
    launcher_store_token(config, lookup_in({}));
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("--nnodes 2 needs SUBLET_STORE_TOKEN, the same on every node"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(launcher_store_token(config, lookup_in({{"SUBLET_STORE_TOKEN", "short"}})), ValueError);
}

TEST(LaunchEnv, ReadsTheProcessEnvironment) {
  const auto variables = valid_env();
  for (const auto& [name, value] : variables) setenv(name.c_str(), value.c_str(), 1);
  const LaunchEnv env = launch_env_from_process();
  for (const auto& [name, value] : variables) unsetenv(name.c_str());
  EXPECT_EQ(env, launch_env_from(lookup_in(variables)));
}

TEST(LaunchEnv, LaunchedAsWorker) {
  EXPECT_TRUE(launched_as_worker(lookup_in(valid_env())));
  EXPECT_TRUE(launched_as_worker(lookup_in({{"WORLD_SIZE", "2"}})));
  EXPECT_FALSE(launched_as_worker(lookup_in({{"MASTER_ADDR", "x"}})));
}

TEST(LaunchEnv, LauncherGivesEveryWorkerADistinctRankThatReadsBack) {
  const LauncherConfig config{.nproc_per_node = 4, .nnodes = 3, .node_rank = 1, .master_addr = "10.0.0.1",
                              .master_port = 12345, .store_token = kToken};
  std::set<int> ranks;
  for (int local = 0; local < config.nproc_per_node; ++local) {
    const LaunchEnv env = worker_launch_env(config, local);
    EXPECT_EQ(env.rank, 1 * 4 + local);  // torchrun's static assignment: node by node
    EXPECT_EQ(env.local_rank, local);
    EXPECT_EQ(env.world_size, 12);
    EXPECT_EQ(env.local_world_size, 4);
    ranks.insert(env.rank);

    std::map<std::string, std::string> variables;
    for (const auto& [name, value] : worker_environment(env, config.node_rank)) variables[name] = value;
    EXPECT_EQ(variables.at("GROUP_RANK"), "1");
    EXPECT_EQ(launch_env_from(lookup_in(variables)), env);  // the worker reads back what it was given
  }
  EXPECT_EQ(ranks.size(), 4u);
}

TEST(LaunchEnv, LauncherRefusesBadConfigs) {
  LauncherConfig config{.nproc_per_node = 2, .store_token = kToken};
  EXPECT_THROW(worker_launch_env(config, 2), ValueError);
  EXPECT_THROW(worker_launch_env(config, -1), ValueError);
  config.node_rank = 1;  // with --nnodes 1
  try {
    worker_launch_env(config, 0);
    ADD_FAILURE() << "node rank 1 of 1 node accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("--node-rank must be in [0, 0] for --nnodes 1, got 1"), std::string::npos);
  }
  config.node_rank = 0;
  config.nproc_per_node = 0;
  EXPECT_THROW(worker_launch_env(config, 0), ValueError);
  config.nproc_per_node = 1;
  config.store_token = "";
  EXPECT_THROW(worker_launch_env(config, 0), ValueError);
}

TEST(LaunchEnv, GeneratedTokensAreLongAndDistinct) {
  const std::string a = generate_store_token();
  const std::string b = generate_store_token();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
}

}  // namespace
