// PyTorch memory snapshots to sublet traces: fixtures in PyTorch's layout written by CPython
// (tests/data/pickle/make_fixtures.py, whose comments give each scenario), and hand-made
// snapshots of the wrong shape, built here with a few opcodes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/pickle_reader.h"
#include "analysis/pytorch_snapshot.h"
#include "analysis/replay.h"
#include "core/errors.h"

namespace sublet::memory {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
using Action = TraceEvent::Action;

std::string fixture(const std::string& name) { return std::string(SUBLET_SOURCE_DIR) + "/tests/data/pickle/" + name; }

std::string load_error(const std::string& path, int device) {
  try {
    load_pytorch_snapshot(path, device);
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

struct Expected {
  Action action;
  std::uint64_t id;
  std::size_t size;
  std::uint64_t stream;
};

void expect_events(const std::vector<TraceEvent>& got, const std::vector<Expected>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].action, want[i].action) << "event " << i;
    EXPECT_EQ(got[i].id, want[i].id) << "event " << i;
    EXPECT_EQ(got[i].size, want[i].size) << "event " << i;
    EXPECT_EQ(got[i].stream, want[i].stream) << "event " << i;
  }
}

// Device 0 of snapshot.pickle (make_fixtures.py device0_trace): the requested sizes, the frees at
// free_completed (block 3 completes after block 4 is allocated), the empty_cache() before the
// "snapshot" marker, and the release inside the 25 MiB allocation dropped.
const std::vector<Expected> kDevice0 = {
    {Action::Alloc, 1, 1000, 0},     {Action::Alloc, 2, 4096, 0},  {Action::Free, 1, 0, 0},
    {Action::Alloc, 3, 5 * kMiB, 0}, {Action::Alloc, 4, 512, 7},   {Action::Free, 3, 0, 0},
    {Action::Free, 2, 0, 0},         {Action::Free, 4, 0, 7},      {Action::EmptyCache, 0, 0, 0},
    {Action::Alloc, 5, 2048, 0},     {Action::Free, 5, 0, 0},      {Action::Alloc, 6, 25 * kMiB, 0},
    {Action::Free, 6, 0, 0},
};

TEST(PytorchSnapshot, ConvertsADeviceTraceToTraceEvents) {
  const PytorchSnapshotTrace snap = load_pytorch_snapshot(fixture("snapshot.pickle"), 0);
  expect_events(snap.events, kDevice0);
  EXPECT_EQ(snap.device, 0);
  EXPECT_EQ(snap.device_count, 2);
  EXPECT_EQ(snap.trace_entries, 24u);
  EXPECT_EQ(snap.empty_cache_events, 1u);
  EXPECT_EQ(snap.internal_releases, 1u);
  ASSERT_TRUE(snap.has_allocator_settings);
  EXPECT_EQ(snap.pytorch_alloc_conf, "max_split_size_mb:256,roundup_power2_divisions:4");
  EXPECT_EQ(snap.alloc_conf, "roundup_power2_divisions:4,max_split_size_mb:256");
  EXPECT_NO_THROW(AllocatorConfig::parse(snap.alloc_conf));

  // The events replay: the 25 MiB block alone is the peak of allocated bytes.
  const ReplayResult replayed = replay_trace(snap.events, snap.alloc_conf, 1024 * kMiB);
  EXPECT_FALSE(replayed.out_of_memory);
  EXPECT_EQ(replayed.events_replayed, snap.events.size());
  EXPECT_GE(replayed.peak_allocated, 25 * kMiB);
}

TEST(PytorchSnapshot, PicksTheDeviceAndRefusesOneOutOfRange) {
  const PytorchSnapshotTrace one = load_pytorch_snapshot(fixture("snapshot.pickle"), 1);
  expect_events(one.events, {{Action::Alloc, 1, 100, 3}, {Action::Free, 1, 0, 3}});
  EXPECT_EQ(one.device, 1);
  EXPECT_EQ(load_error(fixture("snapshot.pickle"), 2),
            fixture("snapshot.pickle") + ": device 2 is out of range: the snapshot has device traces for 2 device(s), 0 to 1");
  EXPECT_NE(load_error(fixture("snapshot.pickle"), -1).find("device -1 is out of range"), std::string::npos);
}

TEST(PytorchSnapshot, ReadsGzipAndOlderLayouts) {
  expect_events(load_pytorch_snapshot(fixture("snapshot.pickle.gz"), 0).events, kDevice0);
  // PyTorch 2.0: no allocator_settings (and protocol 2 here): PyTorch's defaults, said as such.
  const PytorchSnapshotTrace old = load_pytorch_snapshot(fixture("snapshot_no_settings.pickle"), 0);
  expect_events(old.events, kDevice0);
  EXPECT_FALSE(old.has_allocator_settings);
  EXPECT_EQ(old.alloc_conf, "");
  // Expandable segments: allocs inside mapped pages; max_split_size -1 is PyTorch's "unlimited".
  const PytorchSnapshotTrace expandable = load_pytorch_snapshot(fixture("snapshot_expandable.pickle"), 0);
  expect_events(expandable.events, {{Action::Alloc, 1, kMiB, 0}, {Action::Alloc, 2, 3 * kMiB, 0}, {Action::Free, 1, 0, 0}});
  EXPECT_EQ(expandable.alloc_conf, "expandable_segments:True");
}

TEST(PytorchSnapshot, AnIncompleteHistorySaysHowToRecordAFullOne) {
  const std::string overflowed = load_error(fixture("snapshot_overflowed.pickle"), 0);
  EXPECT_EQ(overflowed.find(fixture("snapshot_overflowed.pickle") + ": device 0's history does not start from an empty "
                                                                      "allocator: entry 0 is a free_requested of "
                                                                      "0x7f0000000000, a block the history never allocated"),
            0u)
      << overflowed;
  for (const char* part : {"ring buffer overflowed", "torch.cuda.memory._record_memory_history(max_entries=N)",
                           "this history holds 21 entries"})
    EXPECT_NE(overflowed.find(part), std::string::npos) << part << " in: " << overflowed;
  EXPECT_NE(load_error(fixture("snapshot_unmapped_unknown.pickle"), 0)
                .find("entry 5 is a segment_unmap of 20971520 bytes at 0x7d0001400000 that the history never reserved"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Hand-made snapshots (protocol 2 opcodes) for the shapes Python's fixtures do not cover.

std::string str(const std::string& s) {
  std::string out = "X";
  for (int i = 0; i < 4; ++i) out += static_cast<char>((s.size() >> (8 * i)) & 0xff);
  return out + s;
}
std::string integer(std::int64_t v) {  // LONG1 of 8 bytes: any int64
  std::string out = "\x8a\x08";
  for (int i = 0; i < 8; ++i) out += static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff);
  return out;
}
std::string list(const std::vector<std::string>& items) {
  std::string out = "](";
  for (const auto& item : items) out += item;
  return out + "e";
}
std::string dict(const std::vector<std::pair<std::string, std::string>>& items) {
  std::string out = "}(";
  for (const auto& [key, value] : items) out += str(key) + value;
  return out + "u";
}
std::string entry(const std::string& action, std::int64_t addr, std::int64_t size) {
  return dict({{"action", str(action)}, {"addr", integer(addr)}, {"size", integer(size)}, {"stream", integer(0)}});
}

std::string convert_error(const std::string& body, int device = 0) {
  try {
    const pickle::Document doc = pickle::parse("\x80\x02" + body + ".", "snap");
    convert_pytorch_snapshot(doc, device, "snap");
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

TEST(PytorchSnapshot, ShapesThatAreNotASnapshotAreNamed) {
  EXPECT_EQ(convert_error(list({})), "snap: a pickle of a list, not a PyTorch memory snapshot (the dict "
                                     "torch.cuda.memory._snapshot() returns)");
  EXPECT_EQ(convert_error(dict({{"a", integer(1)}})), "snap: a pickle of a dict without \"device_traces\", not a PyTorch memory snapshot");
  EXPECT_NE(convert_error(dict({{"segments", list({})}})).find("without an allocation history"), std::string::npos);
  EXPECT_NE(convert_error(dict({{"device_traces", dict({})}})).find("\"device_traces\" is a dict, expected a list"),
            std::string::npos);
  // An empty trace names the devices that have one.
  EXPECT_NE(convert_error(dict({{"device_traces", list({list({}), list({entry("segment_alloc", 4096, 2 * kMiB)})})}}))
                .find("device 0 has no allocation history (devices with one: 1; pick with --device)"),
            std::string::npos);
  const auto one_entry = [](const std::string& e) {
    return convert_error(dict({{"device_traces", list({list({entry("segment_alloc", 4096, 2 * kMiB), e})})}}));
  };
  EXPECT_EQ(one_entry(list({})), "snap: device_traces[0][1]: is a list, expected a dict");
  EXPECT_EQ(one_entry(dict({{"action", str("alloc")}, {"size", integer(8)}})), "snap: device_traces[0][1]: has no \"addr\"");
  EXPECT_EQ(one_entry(dict({{"action", str("alloc")}, {"addr", str("0x1000")}, {"size", integer(8)}})),
            "snap: device_traces[0][1]: \"addr\": expected an int, found str");
  EXPECT_EQ(one_entry(entry("alloc", 4096, -8)), "snap: device_traces[0][1]: \"size\": expected a non-negative int, found -8");
  EXPECT_NE(one_entry(entry("user_defined", 4096, 8)).find("unknown action 'user_defined'"), std::string::npos);
  std::vector<std::pair<std::string, std::string>> wide = {{"action", str("snapshot")}};
  for (int i = 0; i < 64; ++i) wide.emplace_back("key" + std::to_string(i), integer(i));
  EXPECT_EQ(one_entry(dict(wide)), "snap: device_traces[0][1]: is a dict of 65 items; a PyTorch trace entry has at most 64");
  EXPECT_NE(one_entry(entry("alloc", 1, 8)).find("entry 1 is an alloc at 0x1 outside every segment the history allocated"),
            std::string::npos);
  // The same block allocated twice without a free in between is a broken trace.
  EXPECT_EQ(convert_error(dict({{"device_traces", list({list({entry("segment_alloc", 4096, 2 * kMiB), entry("alloc", 4096, 8),
                                                              entry("alloc", 4096, 8)})})}})),
            "snap: device_traces[0][2]: alloc at 0x1000, which is already allocated and not freed");
  EXPECT_NE(convert_error(dict({{"device_traces", list({list({entry("alloc", 4096, 8)})})},
                                {"allocator_settings", dict({{"roundup_power2_divisions", dict({{"3", integer(4)}})}})}}))
                .find("snap: allocator_settings: \"roundup_power2_divisions\": expected the keys"),
            std::string::npos);
  EXPECT_NE(convert_error(dict({{"device_traces", list({list({entry("alloc", 4096, 8)})})},
                                {"allocator_settings", dict({{"roundup_power2_divisions", dict({{"1", integer(3)}})}})}}))
                .find("roundup_power2_divisions must be powers of two, got 3"),
            std::string::npos);
}

TEST(PytorchSnapshot, ReleasesOutsideAnAllocationAreEmptyCacheCalls) {
  // A release run followed by a free (the program's empty_cache()) and one at the very end.
  const std::string body = dict({{"device_traces", list({list({
      entry("segment_alloc", 1 << 20, 2 * kMiB), entry("alloc", 1 << 20, 64), entry("segment_alloc", 64 << 20, 2 * kMiB),
      entry("segment_free", 64 << 20, 2 * kMiB), entry("free_requested", 1 << 20, 64), entry("free_completed", 1 << 20, 64),
      entry("segment_free", 1 << 20, 2 * kMiB)})})}});
  const pickle::Document doc = pickle::parse("\x80\x02" + body + ".", "snap");
  const PytorchSnapshotTrace snap = convert_pytorch_snapshot(doc, 0, "snap");
  expect_events(snap.events, {{Action::Alloc, 1, 64, 0}, {Action::EmptyCache, 0, 0, 0}, {Action::Free, 1, 0, 0},
                              {Action::EmptyCache, 0, 0, 0}});
  EXPECT_EQ(snap.empty_cache_events, 2u);
  EXPECT_EQ(snap.internal_releases, 0u);
}

TEST(PytorchSnapshot, LooksLikePickleNeedsProtocolTwoToFive) {
  EXPECT_TRUE(looks_like_pickle("\x80\x04\x95"));
  EXPECT_TRUE(looks_like_pickle("\x80\x02"));
  EXPECT_FALSE(looks_like_pickle("\x80\x06"));
  EXPECT_FALSE(looks_like_pickle("{\"format\""));
  EXPECT_FALSE(looks_like_pickle("\x80"));
}

}  // namespace
}  // namespace sublet::memory
