// The segment map over time (profile/segment_timeline.h, profile/segment_map_svg.h) of small
// known histories on the simulated backend: the segments it finds (fixed and expandable), where
// each block sat, the holes, every moment reserved memory grew with the request behind it, and an
// SVG that names them and is well-formed XML.
#include <gtest/gtest.h>

#include <fstream>

#include "core/format_bytes.h"
#include "memory/caching_allocator.h"
#include "memory/history.h"
#include "memory/simulated_backend.h"
#include "profile/segment_map_svg.h"
#include "profile/segment_timeline.h"
#include "profile/trace_segment_map.h"
#include "profile_test_util.h"

namespace sublet::profile {
namespace {

using memory::kMiB;

constexpr std::size_t kKiB = 1024;

// A 4 MiB block takes a 20 MiB segment and a 6 MiB one splits the same segment; freeing the first
// leaves a hole below the second. A 12 MiB request takes its own 12 MiB segment, 100 KiB a 2 MiB
// small one; then everything is freed and the cache emptied.
std::vector<memory::HistoryEvent> known_history(bool expandable) {
  memory::AllocatorConfig config;
  config.expandable_segments = expandable;
  memory::CachingAllocator allocator(std::make_unique<memory::SimulatedBackend>(std::size_t{1} << 30), config);
  memory::AllocationHistory history;
  history.attach(allocator);
  memory::Block* a = allocator.allocate(4 * kMiB, nullptr, memory::BlockCategory::Activation);
  memory::Block* b = allocator.allocate(6 * kMiB, nullptr, memory::BlockCategory::Gradient);
  allocator.free(a);
  memory::Block* c = allocator.allocate(12 * kMiB);
  memory::Block* d = allocator.allocate(100 * kKiB);
  for (memory::Block* block : {b, c, d}) allocator.free(block);
  allocator.empty_cache();
  history.detach();
  return history.events();
}

std::uint64_t index_of(const std::vector<memory::HistoryEvent>& events, memory::AllocatorEventKind kind, std::size_t nth = 0) {
  for (std::size_t i = 0; i < events.size(); ++i)
    if (events[i].kind == kind && nth-- == 0) return i;
  ADD_FAILURE() << "no such event";
  return 0;
}

TEST(SegmentTimeline, FixedSegmentsTheirBlocksHolesAndGrowths) {
  const auto events = known_history(false);
  const SegmentTimeline t = build_segment_timeline(events);
  ASSERT_EQ(t.segments.size(), 3u);
  EXPECT_EQ(t.segments[0].extent, 20 * kMiB);
  EXPECT_EQ(t.segments[1].extent, 12 * kMiB);
  EXPECT_EQ(t.segments[2].extent, 2 * kMiB);
  EXPECT_FALSE(t.segments[0].small_pool);
  EXPECT_TRUE(t.segments[2].small_pool);
  EXPECT_EQ(t.segments[0].label(), "segment 1: 20.00 MiB large");
  EXPECT_EQ(t.segments[2].label(), "segment 3: 2.00 MiB small");
  for (const TimelineSegment& s : t.segments) {
    EXPECT_FALSE(s.expandable);
    EXPECT_LT(s.released, t.event_count);  // empty_cache gave every one back
  }

  ASSERT_EQ(t.blocks.size(), 4u);
  EXPECT_EQ(t.blocks[0].segment, 0);
  EXPECT_EQ(t.blocks[0].offset, 0u);
  EXPECT_EQ(t.blocks[1].segment, 0);
  EXPECT_EQ(t.blocks[1].offset, 4 * kMiB);  // split off the first segment, above the 4 MiB block
  EXPECT_EQ(t.blocks[1].size, 6 * kMiB);
  EXPECT_EQ(t.blocks[0].end, index_of(events, memory::AllocatorEventKind::FreeCompleted, 0));
  EXPECT_EQ(t.blocks[2].segment, 1);
  EXPECT_EQ(t.blocks[3].segment, 2);
  EXPECT_EQ(t.blocks[3].requested, 100 * kKiB);

  // While any block lives in a fixed segment, all its free bytes are holes; once none does, the
  // segment is free (hole_top 0) until it is given back (mapped 0).
  const std::vector<SegmentLevel>& first = t.segments[0].levels;
  ASSERT_GE(first.size(), 3u);
  EXPECT_EQ(first[0].hole_top, 0u);
  EXPECT_EQ(first[0].mapped, 20 * kMiB);
  EXPECT_EQ(first[1].hole_top, 20 * kMiB);
  EXPECT_EQ(first.back().mapped, 0u);

  ASSERT_EQ(t.growths.size(), 3u);
  const std::size_t requests[] = {4 * kMiB, 12 * kMiB, 100 * kKiB};
  const std::size_t reserved[] = {20 * kMiB, 32 * kMiB, 34 * kMiB};
  for (std::size_t k = 0; k < 3; ++k) {
    const ReservedGrowth& g = t.growths[k];
    EXPECT_TRUE(g.new_segment);
    EXPECT_TRUE(g.new_peak);
    EXPECT_EQ(g.segment, static_cast<int>(k));
    ASSERT_TRUE(g.found);
    EXPECT_EQ(g.request_requested, requests[k]);
    EXPECT_EQ(g.reserved_after, reserved[k]);
    EXPECT_EQ(events[g.request_event].kind, memory::AllocatorEventKind::Alloc);
    EXPECT_GT(g.request_event, g.event);
  }
  EXPECT_EQ(t.growths[0].request_category, memory::BlockCategory::Activation);
  EXPECT_EQ(t.peak_reserved, 34 * kMiB);
  EXPECT_EQ(t.peak_event, t.growths[2].event);
}

TEST(SegmentTimeline, AnExpandableSegmentGrowsAndItsHolesEndAtTheHighestLiveBlock) {
  const auto events = known_history(true);
  const SegmentTimeline t = build_segment_timeline(events);
  ASSERT_EQ(t.segments.size(), 1u);  // one segment for every size of the stream
  const TimelineSegment& s = t.segments[0];
  EXPECT_TRUE(s.expandable);
  EXPECT_EQ(s.label().rfind("segment 1: expandable", 0), 0u) << s.label();
  // 4 MiB, then 6 more, then 12 more (the 4 MiB hole is too small for it); the 100 KiB block
  // fits the hole and maps nothing.
  EXPECT_EQ(s.extent, 22 * kMiB);
  ASSERT_EQ(t.growths.size(), 3u);
  EXPECT_TRUE(t.growths[0].new_segment);
  for (std::size_t k = 1; k < 3; ++k) EXPECT_FALSE(t.growths[k].new_segment);
  EXPECT_EQ(t.growths[1].bytes, 6 * kMiB);
  EXPECT_EQ(t.growths[2].request_requested, 12 * kMiB);
  EXPECT_EQ(t.growths[2].reserved_after, 22 * kMiB);
  ASSERT_EQ(t.blocks.size(), 4u);
  EXPECT_EQ(t.blocks[3].offset, 0u);  // in the hole the first block left
  // After the first block is freed, the free bytes below the 6 MiB block (which ends at 10 MiB)
  // are a hole; the rest of the mapped range is not.
  const std::uint64_t freed = index_of(events, memory::AllocatorEventKind::FreeCompleted, 0);
  const SegmentLevel* in_force = nullptr;
  for (const SegmentLevel& level : s.levels)
    if (level.event <= freed) in_force = &level;
  ASSERT_NE(in_force, nullptr);
  EXPECT_EQ(in_force->hole_top, 10 * kMiB);
  EXPECT_EQ(in_force->mapped, 10 * kMiB);
  // Once the 6 MiB block is freed too (the 12 MiB and 100 KiB ones still live), the top is the
  // 12 MiB block's end at 22 MiB.
  const std::uint64_t second_free = index_of(events, memory::AllocatorEventKind::FreeCompleted, 1);
  for (const SegmentLevel& level : s.levels)
    if (level.event <= second_free) in_force = &level;
  EXPECT_EQ(in_force->hole_top, 22 * kMiB);
  EXPECT_EQ(s.levels.back().mapped, 0u);  // empty_cache unmapped it all
}

TEST(SegmentMapSvg, NamesTheSegmentsTheStepsAndTheGrowthsAndIsWellFormedXml) {
  const auto events = known_history(false);
  SegmentMapOptions options;
  options.title = "known <trace> & co";
  options.subtitle = "PyTorch's default knobs";
  options.steps = {{0, "step 1", "batch 4 x 64 tokens"}, {index_of(events, memory::AllocatorEventKind::Alloc, 2), "step 2", ""}};
  const std::string svg = segment_map_svg(build_segment_timeline(events), options);
  for (const char* text : {"segment 1: 20.00 MiB large", "segment 2: 12.00 MiB large", "segment 3: 2.00 MiB small",
                           "step 1", "batch 4 x 64 tokens", "step 2",
                           "#1 event 0, step 1 (batch 4 x 64 tokens): new segment 1 (20.00 MiB large) for request 4.00 MiB",
                           "new segment 2 (12.00 MiB large) for request 12.00 MiB", "for request 100.00 KiB",
                           "reserved 34.00 MiB (new peak)", "known &lt;trace&gt; &amp; co"})
    EXPECT_NE(svg.find(text), std::string::npos) << text;

  const auto dir = testing::fresh_directory("segment_map");
  const auto file = dir / "map.svg";
  std::ofstream(file) << svg;
  int status = 0;
  const std::string out = testing::run_python(
      "import sys, xml.etree.ElementTree as ET\n"
      "root = ET.parse(sys.argv[1]).getroot()\n"
      "ns = \"{http://www.w3.org/2000/svg}\"\n"
      "texts = [\"\".join(t.itertext()) for t in root.iter(ns + \"text\")]\n"
      "print(root.tag == ns + \"svg\", sum(t.startswith(\"#\") for t in texts))\n",
      file.string(), &status);
  EXPECT_EQ(status, 0) << out;
  // Three numbered marks above the plot and three rows of the table.
  EXPECT_EQ(out, "True 6\n");
  std::filesystem::remove_all(dir);
}

TEST(TraceSegmentMap, AReplayedTraceIsDrawnAndAnOutOfMemoryEndsTheMap) {
  using Action = memory::TraceEvent::Action;
  const std::vector<memory::TraceEvent> trace = {
      {.action = Action::Alloc, .id = 1, .size = 30 * kMiB}, {.action = Action::Alloc, .id = 2, .size = 30 * kMiB},
      {.action = Action::Free, .id = 1}, {.action = Action::Alloc, .id = 3, .size = 40 * kMiB}};
  const TraceSegmentMap fits = trace_segment_map(trace, "", 1024 * kMiB, "fits");
  EXPECT_FALSE(fits.out_of_memory);
  EXPECT_EQ(fits.events_replayed, 4u);
  EXPECT_NE(fits.svg.find("segment 3: 40.00 MiB large"), std::string::npos);
  // 64 MiB: the third request finds a 30 MiB hole and no room for 40 MiB more.
  const TraceSegmentMap fails = trace_segment_map(trace, "", 64 * kMiB, "fails");
  EXPECT_TRUE(fails.out_of_memory);
  EXPECT_EQ(fails.events_replayed, 3u);
  EXPECT_NE(fails.svg.find("out of memory at trace event 3"), std::string::npos);
  const TraceSegmentMap expandable = trace_segment_map(trace, "expandable_segments:True", 1024 * kMiB, "expandable");
  EXPECT_NE(expandable.svg.find("segment 1: expandable, up to 100.00 MiB mapped"), std::string::npos);
  EXPECT_NE(expandable.svg.find("under expandable_segments:True"), std::string::npos);
}

}  // namespace
}  // namespace sublet::profile
