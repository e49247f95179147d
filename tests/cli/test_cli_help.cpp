// What --help shows: switches that default on read "(default on)" with their --no- form, never
// CLI11's "--NAME,--no-NAME{false}", which reads as if the default were off.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/cli/cli_process.h"

namespace sublet {
namespace {

using cli_test::Outcome;
using cli_test::run_sublet;

std::string help_of(const std::vector<std::string>& command) {
  std::vector<std::string> args = command;
  args.push_back("--help");
  const Outcome o = run_sublet(args, {}, std::filesystem::temp_directory_path());
  EXPECT_TRUE(o.exited && o.exit_code == 0) << o.err;
  return o.out;
}

TEST(CliHelp, DefaultOnSwitchesSayDefaultOn) {
  const std::string train = help_of({"train"});
  EXPECT_EQ(train.find("{false}"), std::string::npos) << train;
  EXPECT_NE(train.find("--no-oom-retry"), std::string::npos) << train;
  EXPECT_NE(train.find("continue (default on)"), std::string::npos) << train;

  const std::string step = help_of({"bench", "step"});
  EXPECT_EQ(step.find("{false}"), std::string::npos) << step;
  for (const char* part : {"--no-cudnn-benchmark", "--no-tf32", "benchmark (default on)", "PyTorch's default (default on)"})
    EXPECT_NE(step.find(part), std::string::npos) << part << " not in:\n" << step;
}

}  // namespace
}  // namespace sublet
