// A crash of the `sublet` command is reported on stderr (cli/crash_report.h): the signal and the
// stack's return addresses, then the process dies of that signal as it would have.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/distributed/process_support.h"

namespace sublet {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(CliCrashReport, ASegmentationFaultIsReportedWithItsStackAndStillKillsTheProcess) {
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // inherited: the dying child writes no core file
  const fs::path log = fs::temp_directory_path() / ("sublet_crash_report_" + std::to_string(getpid()) + ".log");
  const testing::Child child = testing::spawn_process(
      {SUBLET_BINARY, "train", "--device", "cpu", "--data", "synthetic", "--synthetic-shape", "1x8x8", "--epochs", "1000"},
      {{"GOMP_SPINCOUNT", "0"}}, log);
  ASSERT_GT(child.pid, 0);
  // Killed once it trains, when the handler is surely installed.
  for (int i = 0; i < 600 && testing::read_text(log).find("training ") == std::string::npos; ++i)
    std::this_thread::sleep_for(50ms);
  ASSERT_NE(testing::read_text(log).find("training "), std::string::npos) << testing::read_text(log);
  kill(child.pid, SIGSEGV);
  const std::optional<int> status = testing::wait_exit(child, 30s);
  const std::string text = testing::read_text(log);
  EXPECT_EQ(status, 128 + SIGSEGV) << text;
  EXPECT_NE(text.find("sublet: fatal signal SIGSEGV (segmentation fault); return addresses"), std::string::npos) << text;
  EXPECT_NE(text.find("sublet(+0x"), std::string::npos) << "no frame of the binary itself:\n" << text;
  fs::remove(log);
}

}  // namespace
}  // namespace sublet
