// libsublet_nvtx_capture.so as NVTX sees it, without sublet: a forked child sets the injection
// variables before its first NVTX call, calls the API directly (push/pop nesting, start/end across
// threads, the Ex forms, ends without a start, a range left open) and exits; the parent reads the
// JSON the library wrote at exit. The sublet-level check is test_nvtx_capture.
#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace sublet {
namespace {

namespace fs = std::filesystem;

// A fresh folder for one test's capture files, removed with it.
struct ScratchDir {
  fs::path path = [] {
    std::string pattern = (fs::temp_directory_path() / "sublet-nvtx-injection-XXXXXX").string();
    return fs::path(::mkdtemp(pattern.data()));
  }();
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

// Runs `body` in a child process with NVTX pointed at the library; the child's exit code is
// body's (std::exit, so the library's exit handler runs).
int run_child(const std::map<std::string, std::string>& env, const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("NVTX_INJECTION64_PATH", SUBLET_NVTX_CAPTURE_LIBRARY, 1);
    for (const auto& [key, value] : env) ::setenv(key.c_str(), value.c_str(), 1);
    std::exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

nvtxEventAttributes_t ascii_attributes(const char* message) {
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = message;
  return attributes;
}

TEST(NvtxInjection, RecordsPushPopAndStartEndRangesWithTheirThreadsAndWritesThemAtExit) {
  ScratchDir scratch;
  const fs::path pattern = scratch.path / "ranges-%p.json";
  const int code = run_child({{"SUBLET_NVTX_CAPTURE", pattern.string()}}, [] {
    if (nvtxRangePushA("outer") != 0) return 10;
    const nvtxEventAttributes_t inner = ascii_attributes("inner");
    if (nvtxRangePushEx(&inner) != 1) return 11;
    if (nvtxRangePop() != 1 || nvtxRangePop() != 0) return 12;
    if (nvtxRangePop() != -1) return 13;  // nothing left to pop: counted as unmatched
    const nvtxEventAttributes_t across = ascii_attributes("across threads");
    const nvtxRangeId_t id = nvtxRangeStartEx(&across);
    std::thread([id] { nvtxRangeEnd(id); }).join();
    nvtxRangeEnd(id);                  // twice: unmatched
    nvtxRangeEnd(id + 1000);           // never started: unmatched
    nvtxRangeStartA("left open");
    return 0;
  });
  ASSERT_EQ(code, 0) << "the child's NVTX calls returned other values than NVTX's contract (see the return codes)";
  // "%p" became the child's pid: the one file in the folder.
  fs::path written;
  for (const auto& entry : fs::directory_iterator(scratch.path))
    if (entry.path().extension() == ".json") written = entry.path();
  ASSERT_FALSE(written.empty()) << "no capture written";
  const auto capture = nlohmann::json::parse(std::ifstream(written));
  EXPECT_EQ(written.filename().string(), "ranges-" + std::to_string(capture["pid"].get<int>()) + ".json");
  EXPECT_EQ(capture["unmatched_ends"], 3);
  const auto& ranges = capture["ranges"];
  ASSERT_EQ(ranges.size(), 4u) << capture.dump(1);
  const auto& outer = ranges[0];
  const auto& inner = ranges[1];
  const auto& across = ranges[2];
  const auto& open = ranges[3];
  EXPECT_EQ(outer["name"], "outer");
  EXPECT_EQ(outer["kind"], "push_pop");
  EXPECT_EQ(outer["depth"], 0);
  EXPECT_EQ(inner["name"], "inner");
  EXPECT_EQ(inner["depth"], 1);
  EXPECT_TRUE(outer["start_ns"] <= inner["start_ns"] && inner["end_ns"] <= outer["end_ns"]) << capture.dump(1);
  EXPECT_EQ(across["name"], "across threads");
  EXPECT_EQ(across["kind"], "start_end");
  EXPECT_GE(across["end_ns"].get<std::int64_t>(), across["start_ns"].get<std::int64_t>());
  EXPECT_NE(across["start_thread"], across["end_thread"]) << "ended on another thread";
  EXPECT_EQ(across["start_thread"], outer["start_thread"]);
  EXPECT_EQ(open["name"], "left open");
  EXPECT_TRUE(open["end_ns"].is_null());
  EXPECT_TRUE(open["end_thread"].is_null());
}

TEST(NvtxInjection, WithoutAnOutputFileNvtxStaysANoOp) {
  const int code = run_child({{"SUBLET_NVTX_CAPTURE", ""}}, [] {
    // The library declined (returned 0): NVTX turns every call into a no-op.
    return nvtxRangePushA("nowhere") == NVTX_NO_PUSH_POP_TRACKING ? 0 : 1;
  });
  EXPECT_EQ(code, 0) << "a range was pushed although the library had nowhere to write it";
}

}  // namespace
}  // namespace sublet
