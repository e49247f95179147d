// `sublet config` and `--print-config` as a user sees them: every switch with its value and
// source, a secret only as set, the allocator configuration in force, a warning naming the
// nearest switch for a misspelt SUBLET_* variable, and a clear error for a bad flag value.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/switch_table.h"
#include "tests/cli/cli_process.h"

namespace sublet {
namespace {

using cli_test::Outcome;

Outcome run_sublet(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  std::string pattern = (std::filesystem::temp_directory_path() / "sublet-cli-config-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) return {};
  const Outcome o = cli_test::run_sublet(args, env, pattern, std::chrono::seconds(60));
  std::filesystem::remove_all(pattern);
  return o;
}

constexpr const char* kToken = "feedfacecafebeef0123456789abcdef";

TEST(CliConfig, ListsEverySwitchWithItsSourceAndHidesTheToken) {
  const Outcome o = run_sublet({"config"}, {{"SUBLET_STORE_TOKEN", kToken},
                                            {"SUBLET_NO_STREAM_OVERLAP", "1"},
                                            {"SUBLET_ALLOC_CONF", "max_split_size_mb:64"}});
  ASSERT_TRUE(o.exited && o.exit_code == 0) << o.err;
  for (const SwitchSpec& spec : switch_table()) {
    if (spec.scope == SwitchScope::Retired) continue;
    EXPECT_NE(o.out.find(std::string(spec.name)), std::string::npos) << spec.name << " missing:\n" << o.out;
  }
  EXPECT_EQ(o.out.find(kToken), std::string::npos) << "the token must not be printed:\n" << o.out;
  EXPECT_EQ(o.err.find(kToken), std::string::npos) << o.err;
  EXPECT_NE(o.out.find("from SUBLET_ALLOC_CONF"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("max_split_size_mb:64"), std::string::npos) << o.out;
}

TEST(CliConfig, JsonSaysValueAndSource) {
  const Outcome o = run_sublet({"config", "--json"}, {{"SUBLET_STORE_TOKEN", kToken}, {"SUBLET_NO_STREAM_OVERLAP", "1"}});
  ASSERT_TRUE(o.exited && o.exit_code == 0) << o.err;
  const nlohmann::json report = nlohmann::json::parse(o.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(report.is_discarded()) << o.out;
  std::map<std::string, nlohmann::json> rows;
  for (const nlohmann::json& row : report["switches"]) rows[row["name"].get<std::string>()] = row;
  ASSERT_TRUE(rows.contains("SUBLET_STORE_TOKEN") && rows.contains("SUBLET_NO_STREAM_OVERLAP") &&
              rows.contains("SUBLET_LOG_CONV_PLANS"))
      << o.out;
  EXPECT_EQ(rows["SUBLET_STORE_TOKEN"]["value"], "set");
  EXPECT_EQ(rows["SUBLET_NO_STREAM_OVERLAP"]["value"], "1");
  EXPECT_EQ(rows["SUBLET_NO_STREAM_OVERLAP"]["source"], "environment");
  EXPECT_EQ(rows["SUBLET_LOG_CONV_PLANS"]["value"], "0");
  EXPECT_EQ(rows["SUBLET_LOG_CONV_PLANS"]["source"], "default");
  EXPECT_EQ(report["allocator"]["source"], "default");
  EXPECT_TRUE(report["allocator"]["devices"].contains("cpu")) << o.out;
}

TEST(CliConfig, WarnsAboutAMisspeltSwitchAndARetiredOne) {
  const Outcome o = run_sublet({"config"}, {{"SUBLET_LOG_CONV_PLAN", "1"}, {"SUBLET_NO_IM2COL_CONV", "1"}});
  ASSERT_TRUE(o.exited && o.exit_code == 0) << o.err;
  EXPECT_NE(o.err.find("warning: SUBLET_LOG_CONV_PLAN is set but sublet reads no such variable; did you mean "
                       "SUBLET_LOG_CONV_PLANS?"),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find("warning: SUBLET_NO_IM2COL_CONV is set but no longer read"), std::string::npos) << o.err;
}

TEST(CliConfig, RefusesABadFlagValue) {
  const Outcome o = run_sublet({"config"}, {{"SUBLET_CPU_NO_AVX512", "yes"}});
  ASSERT_TRUE(o.exited) << o.err;
  EXPECT_EQ(o.exit_code, 1) << o.out;
  EXPECT_NE(o.err.find("error: SUBLET_CPU_NO_AVX512: expected 1 (on), 0 or empty (off), got 'yes'"), std::string::npos)
      << o.err;
}

TEST(CliConfig, PrintConfigComesBeforeTheRun) {
  const Outcome o = run_sublet({"bench", "step", "--print-config", "--device", "cpu", "--model", "resnet20", "--input",
                                "3x8x8", "--batch-size", "2", "--steps", "1", "--warmup", "0"},
                               {{"SUBLET_NO_STREAM_OVERLAP", "1"}});
  ASSERT_TRUE(o.exited && o.exit_code == 0) << o.err;
  const std::size_t config = o.err.find("allocator configuration");
  EXPECT_NE(config, std::string::npos) << o.err;
  EXPECT_NE(o.err.find("SUBLET_NO_STREAM_OVERLAP"), std::string::npos) << o.err;
  EXPECT_EQ(o.out.find("allocator configuration"), std::string::npos) << "the report goes to stderr:\n" << o.out;
  const Outcome help = run_sublet({"train", "--help"}, {});
  ASSERT_TRUE(help.exited && help.exit_code == 0) << help.err;
  EXPECT_NE(help.out.find("--print-config"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace sublet
