// cli/openmp_wait_policy: the one OpenMP wait policy the sublet command starts with. The choice
// depends on the environment's variables only: not on the machine's load, so that a timing on a
// busy machine and one on a quiet machine measure the same configuration.
#include "cli/openmp_wait_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace sublet {
namespace {

using cli::kDefaultSpinCount;
using cli::kSpinCountVariable;
using cli::kWaitPolicyVariable;

EnvironmentLookup lookup_in(std::map<std::string, std::string> variables) {
  return [variables](const std::string& name) -> std::optional<std::string> {
    const auto found = variables.find(name);
    return found == variables.end() ? std::nullopt : std::optional<std::string>(found->second);
  };
}

TEST(OpenMpWaitPolicy, DefaultIsTheFixedSpinCount) {
  const auto variable = cli::openmp_wait_default(lookup_in({{"OMP_NUM_THREADS", "2"}}));
  ASSERT_TRUE(variable.has_value());
  EXPECT_EQ(variable->first, "GOMP_SPINCOUNT");
  EXPECT_EQ(variable->second, "3000");
}

TEST(OpenMpWaitPolicy, TheUsersChoiceWinsEvenWhenEmpty) {
  EXPECT_FALSE(cli::openmp_wait_default(lookup_in({{"OMP_WAIT_POLICY", "passive"}})).has_value());
  EXPECT_FALSE(cli::openmp_wait_default(lookup_in({{"GOMP_SPINCOUNT", "0"}})).has_value());
  EXPECT_FALSE(cli::openmp_wait_default(lookup_in({{"GOMP_SPINCOUNT", ""}})).has_value());
}

TEST(OpenMpWaitPolicy, ReportSaysWhereThePolicyComesFrom) {
  const cli::OpenMpWaitReport ours = cli::openmp_wait_report(lookup_in({{"GOMP_SPINCOUNT", "3000"}}));
  EXPECT_EQ(ours.spin_count, "3000");
  EXPECT_EQ(ours.wait_policy, "");
  EXPECT_NE(ours.description.find("sublet's default"), std::string::npos) << ours.description;
  const cli::OpenMpWaitReport users = cli::openmp_wait_report(lookup_in({{"OMP_WAIT_POLICY", "passive"}}));
  EXPECT_EQ(users.wait_policy, "passive");
  EXPECT_EQ(users.description, "from the environment");
  EXPECT_NE(cli::openmp_wait_report(lookup_in({})).description.find("libgomp's default"), std::string::npos);
}

// `sublet config --json` run with OMP_WAIT_POLICY and GOMP_SPINCOUNT removed from its environment
// (plus `extra`, NAME=VALUE words for env(1)): its "openmp_wait" object.
nlohmann::json reported_wait_policy(const std::string& extra = "") {
  const std::string command = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " + extra + " '" SUBLET_BINARY "' config --json";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {};
  std::string out;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  if (::pclose(pipe) != 0) return {};
  const nlohmann::json report = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  return report.is_discarded() || !report.contains("openmp_wait") ? nlohmann::json{} : report["openmp_wait"];
}

TEST(OpenMpWaitPolicy, SubletStartsWithTheSameSpinCountOnAQuietAndABusyMachine) {
  const nlohmann::json quiet = reported_wait_policy();
  ASSERT_TRUE(quiet.is_object()) << "sublet config --json failed or has no openmp_wait";
  EXPECT_EQ(quiet[kSpinCountVariable], kDefaultSpinCount) << quiet.dump();
  EXPECT_EQ(quiet[kWaitPolicyVariable], "") << quiet.dump();

  // Every core busy (and one more) while sublet starts.
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i <= cores; ++i) {
    busy.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  const nlohmann::json loaded = reported_wait_policy();
  stop = true;
  for (std::thread& t : busy) t.join();
  EXPECT_EQ(loaded, quiet) << "busy: " << loaded.dump() << "\nquiet: " << quiet.dump();

  const nlohmann::json users = reported_wait_policy("OMP_WAIT_POLICY=passive");
  EXPECT_EQ(users[kWaitPolicyVariable], "passive") << users.dump();
  EXPECT_EQ(users[kSpinCountVariable], "") << users.dump();
}

}  // namespace
}  // namespace sublet
