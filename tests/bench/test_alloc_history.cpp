// The replay history loader: both accepted layouts, id reuse and leftovers, and every kind of
// corrupt file giving an IoError that names the file.
#include <gtest/gtest.h>

#include <string>

#include "bench/alloc/history.h"
#include "core/errors.h"
#include "scratch_file.h"

namespace sublet::bench {
namespace {

using sublet::testing::ScratchFile;
using Action = ReplayEvent::Action;

TEST(AllocHistory, ReadsTheTraceFormatOfMemoryReplay) {
  ScratchFile file(R"({"format": "sublet-alloc-trace", "version": 1, "events": [
      {"action": "alloc", "id": 10, "size": 4096, "stream": 0},
      {"action": "alloc", "id": 11, "size": 1048576, "stream": 0},
      {"action": "free", "id": 10},
      {"action": "alloc", "id": 12, "size": 512}]})");
  const ReplayHistory h = load_history(file.path());
  EXPECT_EQ(h.source, file.path());
  ASSERT_EQ(h.events.size(), 4u);
  EXPECT_EQ(h.alloc_count, 3u);
  EXPECT_EQ(h.slot_count, 3u);
  EXPECT_EQ(h.events[0].action, Action::Alloc);
  EXPECT_EQ(h.events[0].size, 4096u);
  EXPECT_EQ(h.events[2].action, Action::Free);
  EXPECT_EQ(h.events[2].slot, h.events[0].slot);  // the free finds its alloc's slot
  EXPECT_NE(h.events[1].slot, h.events[0].slot);
  EXPECT_EQ(h.peak_live_bytes, 4096u + 1048576u);  // 512 arrives after the 4096 is gone
}

TEST(AllocHistory, SkipsTheMarkersOfVersion2Traces) {
  ScratchFile file(R"({"format": "sublet-alloc-trace", "version": 2, "events": [
      {"action": "alloc", "id": 1, "size": 4096, "stream": 0, "category": "workspace"},
      {"action": "free", "id": 1},
      {"action": "empty_cache"},
      {"action": "reset_peaks"},
      {"action": "alloc", "id": 2, "size": 512}]})");
  const ReplayHistory h = load_history(file.path());
  ASSERT_EQ(h.events.size(), 3u);  // the two markers are not timed
  EXPECT_EQ(h.events[2].action, Action::Alloc);
  EXPECT_EQ(h.events[2].size, 512u);
  EXPECT_EQ(h.alloc_count, 2u);
}

TEST(AllocHistory, ReadsABareEventListAndReusedIds) {
  ScratchFile file(R"([{"action": "alloc", "id": 1, "size": 100},
                       {"action": "free", "id": 1, "size": 100},
                       {"action": "alloc", "id": 1, "size": 300},
                       {"action": "alloc", "id": 2, "size": 200}])");
  const ReplayHistory h = load_history(file.path());
  EXPECT_EQ(h.alloc_count, 3u);
  EXPECT_EQ(h.slot_count, 2u);  // id 1 was live twice, never at once
  EXPECT_EQ(h.events[2].slot, h.events[0].slot);
  EXPECT_EQ(h.peak_live_bytes, 500u);
}

void expect_io_error(const std::string& contents, const std::string& expected_part) {
  ScratchFile file(contents);
  try {
    load_history(file.path());
    FAIL() << "no IoError for: " << contents;
  } catch (const IoError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(file.path()), std::string::npos) << message;
    EXPECT_NE(message.find(expected_part), std::string::npos) << message;
  }
}

TEST(AllocHistory, CorruptFilesNameTheFileAndTheProblem) {
  expect_io_error("", "not valid JSON");
  expect_io_error(R"([{"action": "alloc", "id": 1, "size": 4)", "not valid JSON");  // truncated
  expect_io_error(R"("events")", "expected a JSON object");
  expect_io_error(R"({"format": "pytorch-snapshot", "events": []})", "format is \"pytorch-snapshot\"");
  expect_io_error(R"({"format": "sublet-alloc-trace", "version": 3, "events": []})", "version 3");
  expect_io_error(R"({"format": "sublet-alloc-trace"})", "\"events\" list");
  expect_io_error(R"([])", "no alloc events");
  expect_io_error(R"([{"action": "alloc", "id": 1, "size": 8}, 5])", "event 1: expected an object");
  expect_io_error(R"([{"id": 1, "size": 8}])", "event 0: missing \"action\"");
  expect_io_error(R"([{"action": "realloc", "id": 1, "size": 8}])", "unknown action \"realloc\"");
  expect_io_error(R"([{"action": "alloc", "size": 8}])", "missing \"id\"");
  expect_io_error(R"([{"action": "alloc", "id": 1}])", "missing \"size\"");
  expect_io_error(R"([{"action": "alloc", "id": 1, "size": -8}])", "non-negative integer");
  expect_io_error(R"([{"action": "alloc", "id": 1, "size": 8.5}])", "non-negative integer");
  expect_io_error(R"([{"action": "alloc", "id": 1, "size": 0}])", "must be > 0");
  expect_io_error(R"([{"action": "alloc", "id": 1, "size": 8}, {"action": "alloc", "id": 1, "size": 8}])",
                  "event 1: alloc of id 1, which is already live");
  expect_io_error(R"([{"action": "alloc", "id": 1, "size": 8}, {"action": "free", "id": 2}])",
                  "event 1: free of id 2, which is not live");
  expect_io_error(R"([{"action": "alloc", "id": 1, "size": 8}, {"action": "free", "id": 1}, {"action": "free", "id": 1}])",
                  "event 2: free of id 1, which is not live");
}

TEST(AllocHistory, MissingFileIsAnIoErrorNamingIt) {
  const std::string path = "/nonexistent/sublet/history.json";
  try {
    load_history(path);
    FAIL() << "no IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sublet::bench
