// What --help shows: switches that default on read "(default on)" with their --no- form, never
// CLI11's "--NAME,--no-NAME{false}", which reads as if the default were off.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/resource.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli/cli_process.h"

namespace sublet {
namespace {

using cli_test::Outcome;

// Runs sublet in a folder of its own: the runner keeps stdout and stderr in files there, and
// ctest runs tests in parallel.
Outcome run_sublet(const std::vector<std::string>& args) {
  std::string pattern = (std::filesystem::temp_directory_path() / "sublet-cli-help-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) return {};
  const Outcome o = cli_test::run_sublet(args, {}, pattern);
  std::filesystem::remove_all(pattern);
  return o;
}

std::string help_of(const std::vector<std::string>& command) {
  std::vector<std::string> args = command;
  args.push_back("--help");
  const Outcome o = run_sublet(args);
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

// `sublet train --help` offers the token schedule flags of bench step (not --resolutions: train
// takes schedules for GPT models only) and says that the evaluation keeps a fixed length.
TEST(CliHelp, TrainOffersTheTokenScheduleFlags) {
  const std::string train = help_of({"train"});
  for (const char* part : {"--seq-len-range", "--tokens-per-batch", "--shape-schedule", "--write-shape-schedule",
                           "evaluation keeps this default, fixed"})
    EXPECT_NE(train.find(part), std::string::npos) << part << " not in:\n" << train;
  EXPECT_EQ(train.find("--resolutions"), std::string::npos) << train;
}

// `sublet --version` names the release (CMake's project version, passed in by the test's build)
// and, in a checkout, the revision it was built from.
TEST(CliHelp, VersionNamesReleaseAndRevision) {
  const Outcome o = run_sublet({"--version"});
  ASSERT_TRUE(o.exited && o.exit_code == 0) << o.err;
  EXPECT_EQ(o.out.rfind(std::string("sublet ") + SUBLET_EXPECTED_VERSION, 0), 0u) << o.out;
  EXPECT_NE(o.out.find("backends: CPU"), std::string::npos) << o.out;
#ifdef SUBLET_BUILT_FROM_CHECKOUT
  const std::size_t at = o.out.find("(revision ");
  ASSERT_NE(at, std::string::npos) << o.out;
  const std::string revision = o.out.substr(at + 10, 12);
  EXPECT_EQ(revision.find_first_not_of("0123456789abcdef"), std::string::npos) << o.out;
#endif
}

// `sublet --help` lists every command, each on one line with its description, and nothing else;
// the commands with commands of their own (bench, demo) name them there.
TEST(CliHelp, TopLevelHelpListsEveryCommandOnOneLine) {
  const Outcome o = run_sublet({"--help"});
  ASSERT_TRUE(o.exited && o.exit_code == 0) << o.err;
  const std::size_t section = o.out.find("\nSubcommands:\n");
  ASSERT_NE(section, std::string::npos) << o.out;
  std::vector<std::string> lines;
  std::istringstream in(o.out.substr(section + 14));
  for (std::string line; std::getline(in, line) && !line.empty();) lines.push_back(line);
  const std::vector<std::string> commands = {"demo", "bench", "replay", "plan", "profile", "train", "config", "generate"};
  ASSERT_EQ(lines.size(), commands.size()) << "one line per command expected in:\n" << o.out;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    const std::string& line = lines[i];
    ASSERT_TRUE(line.starts_with("  " + commands[i] + " ")) << commands[i] << " expected, got: " << line;
    EXPECT_NE(line.find_first_not_of(' ', 2 + commands[i].size()), std::string::npos) << "no description on: " << line;
  }
  for (const char* sub : {"alloc (", "step ("}) EXPECT_NE(lines[1].find(sub), std::string::npos) << lines[1];
  EXPECT_NE(lines[0].find("release ("), std::string::npos) << lines[0];
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SUBLET_SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SUBLET_SANITIZED_BUILD 1
#endif
#endif

// --help and CPU-only commands must not pay for cuBLAS: linked, it loaded at start and made
// `sublet --help` take 222 MB resident; it is now opened when the first GPU matmul needs it.
TEST(CliHelp, HelpStaysSmallInMemory) {
#ifdef SUBLET_SANITIZED_BUILD
  GTEST_SKIP() << "sanitizer builds carry their own shadow memory: resident size is not sublet's";
#endif
  const Outcome o = run_sublet({"--help"});
  ASSERT_TRUE(o.exited && o.exit_code == 0) << o.err;
  rusage children{};
  ASSERT_EQ(::getrusage(RUSAGE_CHILDREN, &children), 0);
  const long resident_mib = children.ru_maxrss / 1024;  // ru_maxrss is in KiB on Linux
  EXPECT_LE(resident_mib, 50) << "sublet --help peaked at " << resident_mib << " MiB resident";
}

}  // namespace
}  // namespace sublet
