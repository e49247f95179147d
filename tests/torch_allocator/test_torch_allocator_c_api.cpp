// The C interface of libsublet_torch_allocator.so (torch_allocator/sublet_torch_allocator.h), as
// PyTorch and python/sublet_torch call it, over simulated devices (no GPU needed): pointers and
// their statistics under PyTorch's keys, per-device allocators, per-stream pools, errors, and a
// dumped snapshot read back through analysis/pytorch_snapshot (the reader `sublet replay` uses).
// The tests share one process-wide table of devices (as PyTorch's process does): each leaves
// nothing allocated behind, and compares statistics as differences.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/pickle_reader.h"
#include "analysis/pytorch_snapshot.h"
#include "analysis/replay.h"
#include "torch_allocator/sublet_torch_allocator.h"

namespace {

constexpr std::size_t kMiB = 1024 * 1024;
constexpr std::size_t kCapacity = 1024 * kMiB;

cudaStream_t stream(std::uintptr_t id) { return reinterpret_cast<cudaStream_t>(id); }

std::string last_error() {
  std::string text(sublet_torch_last_error(nullptr, 0), '\0');
  sublet_torch_last_error(text.data(), text.size() + 1);
  return text;
}

// Two simulated devices of 1 GiB with sublet's CUDA defaults, set up once for the process.
void use_simulated_devices() {
  static const bool done = [] {
    unsetenv("SUBLET_ALLOC_CONF");
    unsetenv("PYTORCH_CUDA_ALLOC_CONF");
    const int rc = sublet_torch_use_simulated_devices(2, kCapacity);
    EXPECT_EQ(rc, 0) << last_error();
    // Device 0's allocator exists from here on, whichever test runs alone (ctest runs each in its
    // own process).
    sublet_torch_free(sublet_torch_try_malloc(1, 0, nullptr), 1, 0, nullptr);
    return rc == 0;
  }();
  ASSERT_TRUE(done);
}

std::int64_t stat(int device, const char* key) {
  std::int64_t value = -12345;
  EXPECT_EQ(sublet_torch_stat(device, key, &value), 0) << last_error();
  return value;
}

std::map<std::string, std::int64_t> stats(int device) {
  std::string text(sublet_torch_memory_stats(device, nullptr, 0), '\0');
  EXPECT_EQ(sublet_torch_memory_stats(device, text.data(), text.size() + 1), text.size());
  std::map<std::string, std::int64_t> out;
  std::istringstream in(text);
  std::string key;
  std::int64_t value = 0;
  while (in >> key >> value) out[key] = value;
  return out;
}

class TorchAllocatorCApi : public ::testing::Test {
 protected:
  void SetUp() override { use_simulated_devices(); }
};

TEST_F(TorchAllocatorCApi, MallocAndFreeMoveThePyTorchStatistics) {
  const auto before = stats(0);
  void* p = sublet_torch_malloc(1000, 0, nullptr);
  ASSERT_NE(p, nullptr);
  const auto during = stats(0);
  EXPECT_EQ(during.at("allocated_bytes.all.current") - before.at("allocated_bytes.all.current"), 1024);  // 512-byte rounding
  EXPECT_EQ(during.at("requested_bytes.all.current") - before.at("requested_bytes.all.current"), 1000);
  EXPECT_EQ(during.at("allocation.all.current") - before.at("allocation.all.current"), 1);
  EXPECT_EQ(during.at("active_bytes.all.current") - before.at("active_bytes.all.current"), 1024);
  EXPECT_GE(during.at("reserved_bytes.all.current"), during.at("allocated_bytes.all.current"));
  EXPECT_GE(during.at("allocated_bytes.all.peak"), during.at("allocated_bytes.all.current"));
  EXPECT_EQ(stat(0, "allocated_bytes.all.current"), during.at("allocated_bytes.all.current"));

  std::int64_t count = 0, requested = 0, block_bytes = 0;
  ASSERT_EQ(sublet_torch_live_allocations(0, &count, &requested, &block_bytes), 0);
  EXPECT_EQ(count, during.at("allocation.all.current"));
  EXPECT_EQ(requested, during.at("requested_bytes.all.current"));
  EXPECT_EQ(block_bytes, during.at("allocated_bytes.all.current"));

  sublet_torch_free(p, 1000, 0, nullptr);
  const auto after = stats(0);
  EXPECT_EQ(after.at("allocated_bytes.all.current"), before.at("allocated_bytes.all.current"));
  EXPECT_EQ(after.at("allocation.all.current"), before.at("allocation.all.current"));
}

TEST_F(TorchAllocatorCApi, StatisticsHaveEveryKeyOfTorchMemoryStats) {
  const auto s = stats(0);
  for (const char* family : {"allocated_bytes", "reserved_bytes", "active_bytes", "requested_bytes", "inactive_split_bytes",
                             "allocation", "segment", "active", "inactive_split"})
    for (const char* pool : {"all", "small_pool", "large_pool"})
      for (const char* field : {"current", "peak", "allocated", "freed"})
        EXPECT_TRUE(s.count(std::string(family) + "." + pool + "." + field)) << family << "." << pool << "." << field;
  for (const char* key : {"num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free", "num_sync_all_streams",
                          "max_split_size", "oversize_allocations.current", "oversize_segments.peak"})
    EXPECT_TRUE(s.count(key)) << key;
  std::int64_t value = 0;
  EXPECT_EQ(sublet_torch_stat(0, "allocated_bytes.all.nonsense", &value), -1);
  EXPECT_NE(last_error().find("unknown statistic"), std::string::npos) << last_error();
}

TEST_F(TorchAllocatorCApi, SizeZeroGetsDistinctPointers) {
  void* a = sublet_torch_malloc(0, 0, nullptr);
  void* b = sublet_torch_malloc(0, 0, nullptr);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(a, b);
  sublet_torch_free(a, 0, 0, nullptr);
  sublet_torch_free(b, 0, 0, nullptr);
}

TEST_F(TorchAllocatorCApi, EachDeviceHasItsOwnAllocator) {
  const std::int64_t device0 = stat(0, "allocated_bytes.all.current");
  void* p = sublet_torch_malloc(4 * kMiB, 1, nullptr);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(stat(0, "allocated_bytes.all.current"), device0);
  EXPECT_GE(stat(1, "allocated_bytes.all.current"), static_cast<std::int64_t>(4 * kMiB));
  EXPECT_GE(sublet_torch_device_count(), 2);
  // Freeing on the wrong device is refused and leaves the block alone.
  sublet_torch_free(p, 4 * kMiB, 0, nullptr);
  EXPECT_NE(last_error().find("not a pointer"), std::string::npos) << last_error();
  EXPECT_GE(stat(1, "allocated_bytes.all.current"), static_cast<std::int64_t>(4 * kMiB));
  sublet_torch_free(p, 4 * kMiB, 1, nullptr);
}

TEST_F(TorchAllocatorCApi, FreedBlocksAreReusedOnTheirOwnStreamOnly) {
  void* a = sublet_torch_malloc(3 * kMiB, 0, stream(0x100));
  sublet_torch_free(a, 3 * kMiB, 0, stream(0x100));
  void* other = sublet_torch_malloc(3 * kMiB, 0, stream(0x200));
  void* same = sublet_torch_malloc(3 * kMiB, 0, stream(0x100));
  EXPECT_NE(other, a);
  EXPECT_EQ(same, a);
  sublet_torch_free(other, 3 * kMiB, 0, stream(0x200));
  sublet_torch_free(same, 3 * kMiB, 0, stream(0x100));
}

TEST_F(TorchAllocatorCApi, UnknownPointersAreErrorsNotCrashes) {
  int local = 0;
  sublet_torch_free(&local, 4, 0, nullptr);
  EXPECT_NE(last_error().find("not a pointer sublet_torch_malloc handed out"), std::string::npos) << last_error();
  EXPECT_EQ(sublet_torch_record_stream(&local, stream(0x300)), -1);
  EXPECT_NE(last_error().find("not a live pointer"), std::string::npos) << last_error();
  EXPECT_EQ(sublet_torch_try_malloc(-5, 0, nullptr), nullptr);
  EXPECT_NE(last_error().find("negative size"), std::string::npos) << last_error();
  EXPECT_EQ(sublet_torch_try_malloc(10, 7, nullptr), nullptr);  // only two simulated devices
  EXPECT_NE(last_error().find("simulated device"), std::string::npos) << last_error();
  EXPECT_EQ(sublet_torch_use_simulated_devices(1, kCapacity), -1);  // allocators exist by now
}

TEST_F(TorchAllocatorCApi, OutOfMemoryIsAnExceptionOrANullPointer) {
  const std::int64_t ooms = stat(0, "num_ooms");
  EXPECT_EQ(sublet_torch_try_malloc(2 * kCapacity, 0, nullptr), nullptr);
  EXPECT_NE(last_error().find("out of memory"), std::string::npos) << last_error();
  // The torch hooks turn exactly these into torch.OutOfMemoryError.
  EXPECT_EQ(sublet_torch_last_error_is_out_of_memory(), 1);
  EXPECT_EQ(sublet_torch_record_stream(reinterpret_cast<void*>(0x1234), nullptr), -1);
  EXPECT_EQ(sublet_torch_last_error_is_out_of_memory(), 0) << last_error();
  // PyTorch calls sublet_torch_malloc from C++: the exception becomes a Python RuntimeError.
  EXPECT_THROW(sublet_torch_malloc(2 * kCapacity, 0, nullptr), std::exception);
  EXPECT_EQ(stat(0, "num_ooms"), ooms + 2);
}

TEST_F(TorchAllocatorCApi, PeakResetAndEmptyCache) {
  void* big = sublet_torch_malloc(64 * kMiB, 0, nullptr);
  sublet_torch_free(big, 64 * kMiB, 0, nullptr);
  EXPECT_GE(stat(0, "allocated_bytes.all.peak"), static_cast<std::int64_t>(64 * kMiB));
  EXPECT_GE(stat(0, "reserved_bytes.all.current"), static_cast<std::int64_t>(64 * kMiB));  // cached
  ASSERT_EQ(sublet_torch_reset_peak_memory_stats(0), 0);
  EXPECT_EQ(stat(0, "allocated_bytes.all.peak"), stat(0, "allocated_bytes.all.current"));
  ASSERT_EQ(sublet_torch_empty_cache(-1), 0);
  EXPECT_EQ(stat(0, "reserved_bytes.all.current"), stat(0, "allocated_bytes.all.current"));
  EXPECT_LT(stat(0, "reserved_bytes.all.current"), static_cast<std::int64_t>(64 * kMiB));
  const std::int64_t allocations = stat(0, "allocation.all.allocated");
  ASSERT_GT(allocations, 0);
  ASSERT_EQ(sublet_torch_reset_accumulated_memory_stats(0), 0);
  EXPECT_EQ(stat(0, "allocation.all.allocated"), 0);
}

TEST_F(TorchAllocatorCApi, CacheInfoIsTheLargerOfFreeDeviceMemoryAndTheLargestCachedBlock) {
  ASSERT_EQ(sublet_torch_empty_cache(0), 0);
  std::size_t largest = 0;
  ASSERT_EQ(sublet_torch_cache_info(0, &largest), 0) << last_error();
  const auto reserved = static_cast<std::size_t>(stat(0, "reserved_bytes.all.current"));
  EXPECT_EQ(largest, kCapacity - reserved);  // the simulated device's free memory
  EXPECT_EQ(sublet_torch_cache_info(0, nullptr), -1);
}

TEST_F(TorchAllocatorCApi, MemoryFractionCapsReservedMemory) {
  ASSERT_EQ(sublet_torch_empty_cache(1), 0);
  ASSERT_EQ(sublet_torch_set_memory_fraction(0.25, 1), 0);
  EXPECT_EQ(sublet_torch_try_malloc(512 * kMiB, 1, nullptr), nullptr);
  void* fits = sublet_torch_try_malloc(128 * kMiB, 1, nullptr);
  EXPECT_NE(fits, nullptr) << last_error();
  sublet_torch_free(fits, 128 * kMiB, 1, nullptr);
  EXPECT_EQ(sublet_torch_set_memory_fraction(1.5, 1), -1);
  ASSERT_EQ(sublet_torch_set_memory_fraction(1.0, 1), 0);
  void* now_fits = sublet_torch_try_malloc(512 * kMiB, 1, nullptr);
  EXPECT_NE(now_fits, nullptr) << last_error();
  sublet_torch_free(now_fits, 512 * kMiB, 1, nullptr);
}

TEST_F(TorchAllocatorCApi, RecordStreamKeepsAFreedBlockFromReuse) {
  // Device 1: the simulated events of the other stream never complete here, so the block stays
  // waiting; the snapshot test uses device 0.
  void* p = sublet_torch_malloc(5 * kMiB, 1, stream(0x100));
  ASSERT_EQ(sublet_torch_record_stream(p, stream(0x200)), 0) << last_error();
  sublet_torch_free(p, 5 * kMiB, 1, stream(0x100));
  EXPECT_GT(stat(1, "active_bytes.all.current"), stat(1, "allocated_bytes.all.current"));  // waits for stream 0x200
  void* q = sublet_torch_malloc(5 * kMiB, 1, stream(0x100));
  EXPECT_NE(q, p);
  sublet_torch_free(q, 5 * kMiB, 1, stream(0x100));
}

TEST_F(TorchAllocatorCApi, SummaryAndConfig) {
  std::string summary(sublet_torch_memory_summary(0, nullptr, 0), '\0');
  sublet_torch_memory_summary(0, summary.data(), summary.size() + 1);
  EXPECT_NE(summary.find("sublet memory summary"), std::string::npos) << summary;
  EXPECT_NE(summary.find("Allocated memory"), std::string::npos) << summary;
  std::string config(sublet_torch_config(0, nullptr, 0), '\0');
  sublet_torch_config(0, config.data(), config.size() + 1);
  EXPECT_NE(config.find("expandable_segments:True"), std::string::npos) << config;  // sublet's CUDA default
  EXPECT_NE(config.find("simulated"), std::string::npos) << config;
  // A buffer too small gets nothing written but learns the size.
  char tiny[4] = {'x', 'x', 'x', 'x'};
  EXPECT_EQ(sublet_torch_memory_summary(0, tiny, sizeof tiny), summary.size());
  EXPECT_EQ(tiny[0], 'x');
}

TEST_F(TorchAllocatorCApi, SnapshotRoundTripsThroughThePytorchSnapshotReader) {
  ASSERT_EQ(sublet_torch_empty_cache(0), 0);
  ASSERT_EQ(stat(0, "allocated_bytes.all.current"), 0);
  ASSERT_EQ(sublet_torch_record_history(1, 0), 0);
  ASSERT_EQ(sublet_torch_reset_peak_memory_stats(0), 0);
  void* a = sublet_torch_malloc(1000, 0, nullptr);
  void* b = sublet_torch_malloc(3 * kMiB, 0, nullptr);
  sublet_torch_free(a, 1000, 0, nullptr);
  void* c = sublet_torch_malloc(5000, 0, stream(0x700));
  sublet_torch_free(b, 3 * kMiB, 0, nullptr);
  sublet_torch_free(c, 5000, 0, stream(0x700));
  void* d = sublet_torch_malloc(700, 0, nullptr);  // live at the dump

  const auto path = std::filesystem::temp_directory_path() / ("sublet_torch_snapshot_" + std::to_string(getpid()) + ".pickle");
  ASSERT_EQ(sublet_torch_dump_snapshot(path.c_str()), 0) << last_error();
  const std::int64_t allocated = stat(0, "allocated_bytes.all.current");
  const std::int64_t reserved = stat(0, "reserved_bytes.all.current");
  const std::int64_t peak_allocated = stat(0, "allocated_bytes.all.peak");

  // The history, as `sublet replay` reads a PyTorch snapshot.
  const sublet::memory::PytorchSnapshotTrace trace = sublet::memory::load_pytorch_snapshot(path.string(), 0);
  std::vector<std::size_t> alloc_sizes;
  std::vector<std::uint64_t> alloc_streams;
  std::size_t frees = 0;
  for (const auto& e : trace.events) {
    if (e.action == sublet::memory::TraceEvent::Action::Alloc) alloc_sizes.push_back(e.size), alloc_streams.push_back(e.stream);
    if (e.action == sublet::memory::TraceEvent::Action::Free) ++frees;
  }
  EXPECT_EQ(alloc_sizes, (std::vector<std::size_t>{1000, 3 * kMiB, 5000, 700}));  // the bytes requested
  EXPECT_EQ(alloc_streams, (std::vector<std::uint64_t>{0, 0, 0x700, 0}));
  EXPECT_EQ(frees, 3u);
  EXPECT_TRUE(trace.has_allocator_settings);
  EXPECT_EQ(trace.alloc_conf, "expandable_segments:True");
  // Replayed under the recorded settings, the history peaks where the allocator did.
  const auto replayed = sublet::memory::replay_trace(trace.events, trace.alloc_conf, kCapacity);
  EXPECT_EQ(static_cast<std::int64_t>(replayed.peak_allocated), peak_allocated);

  // The segments: PyTorch's keys, and totals that agree with the statistics.
  const auto document = sublet::memory::pickle::parse(sublet::memory::pickle::read_file_maybe_gzip(path.string()), path.string());
  const auto root = document.root();
  const auto segments = root.find("segments");
  ASSERT_TRUE(segments.has_value());
  std::int64_t total = 0, allocated_in_blocks = 0;
  for (std::size_t i = 0; i < segments->size(); ++i) {
    const auto s = segments->at(i);
    if (s.find("device")->as_int() != 0) continue;
    total += static_cast<std::int64_t>(s.find("total_size")->as_uint64());
    for (const char* key : {"address", "allocated_size", "active_size", "stream", "segment_type", "blocks"})
      EXPECT_TRUE(s.find(key).has_value()) << key;
    const auto blocks = *s.find("blocks");
    for (std::size_t j = 0; j < blocks.size(); ++j) {
      const auto block = blocks.at(j);
      for (const char* key : {"address", "size", "requested_size", "state"}) EXPECT_TRUE(block.find(key).has_value()) << key;
      if (block.find("state")->as_string() == "active_allocated")
        allocated_in_blocks += static_cast<std::int64_t>(block.find("size")->as_uint64());
    }
  }
  EXPECT_EQ(total, reserved);
  EXPECT_EQ(allocated_in_blocks, allocated);
  EXPECT_EQ(root.find("device_traces")->size(), static_cast<std::size_t>(sublet_torch_device_count()));  // one per device slot

  sublet_torch_free(d, 700, 0, nullptr);
  ASSERT_EQ(sublet_torch_record_history(0, 0), 0);
  std::filesystem::remove(path);
}

TEST_F(TorchAllocatorCApi, ConfigFromCodeIsCheckedAndRefusedOnceItCouldNotApply) {
  // Device 0's allocator exists with sublet's defaults (the environment has no settings here).
  EXPECT_EQ(sublet_torch_set_config("expandable_segments:False"), -1);
  EXPECT_NE(last_error().find("before the first allocation"), std::string::npos) << last_error();
  EXPECT_EQ(sublet_torch_set_config("expandable_segments:True"), 0) << last_error();  // what it has: accepted
  EXPECT_EQ(sublet_torch_set_config("expandable_segmentz:True"), -1);
  EXPECT_NE(last_error().find("expandable_segmentz"), std::string::npos) << last_error();
  EXPECT_EQ(sublet_torch_set_config(nullptr), 0) << last_error();
}

TEST_F(TorchAllocatorCApi, VersionIsTheProjectVersion) {
  EXPECT_STREQ(sublet_torch_version(), SUBLET_PROJECT_VERSION);  // CMake's PROJECT_VERSION (CMakeLists.txt)
}

// A stand-in for the Python package's callback: counts its calls and names one fixed stack.
int frames_calls = 0;
std::uint32_t two_frames() {
  ++frames_calls;
  return sublet_torch_intern_frames("train.py\t12\tstep\nmain.py\t3\t<module>");
}

TEST_F(TorchAllocatorCApi, FramesCallbackGivesBlocksAndAllocEventsTheirStack) {
  ASSERT_EQ(sublet_torch_record_history(1, 0), 0);
  frames_calls = 0;
  sublet_torch_set_frames_callback(two_frames);
  void* with_stack = sublet_torch_malloc(4096, 0, nullptr);
  void* freed = sublet_torch_malloc(8192, 0, nullptr);
  sublet_torch_set_frames_callback(nullptr);
  void* without_stack = sublet_torch_malloc(4096, 0, nullptr);
  sublet_torch_free(freed, 8192, 0, nullptr);
  EXPECT_EQ(frames_calls, 2);

  const auto path = std::filesystem::temp_directory_path() / ("sublet_torch_frames_" + std::to_string(getpid()) + ".pickle");
  ASSERT_EQ(sublet_torch_dump_snapshot(path.c_str()), 0) << last_error();
  sublet_torch_free(with_stack, 4096, 0, nullptr);
  sublet_torch_free(without_stack, 4096, 0, nullptr);
  ASSERT_EQ(sublet_torch_record_history(0, 0), 0);
  const auto document = sublet::memory::pickle::parse(sublet::memory::pickle::read_file_maybe_gzip(path.string()), path.string());
  std::filesystem::remove(path);
  const auto root = document.root();

  // "frames" as PyTorch writes them: [{"filename", "line", "name"}, ...], innermost first.
  auto describe = [](const auto& frames) {
    std::string text;
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const auto f = frames.at(i);
      text += std::string(f.find("filename")->as_string()) + ":" + std::to_string(f.find("line")->as_int()) + ":" +
              std::string(f.find("name")->as_string()) + ";";
    }
    return text;
  };
  const std::string expected = "train.py:12:step;main.py:3:<module>;";
  std::map<std::uint64_t, std::string> block_frames;
  const auto segments = *root.find("segments");
  for (std::size_t i = 0; i < segments.size(); ++i) {
    if (segments.at(i).find("device")->as_int() != 0) continue;  // simulated devices may share addresses
    const auto blocks = *segments.at(i).find("blocks");
    for (std::size_t j = 0; j < blocks.size(); ++j)
      block_frames[blocks.at(j).find("address")->as_uint64()] = describe(*blocks.at(j).find("frames"));
  }
  EXPECT_EQ(block_frames[reinterpret_cast<std::uintptr_t>(with_stack)], expected);
  EXPECT_EQ(block_frames[reinterpret_cast<std::uintptr_t>(without_stack)], "");

  std::map<std::string, std::string> event_frames;  // "action@address" -> frames
  const auto trace = root.find("device_traces")->at(0);
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const auto e = trace.at(i);
    if (!e.find("addr").has_value()) continue;
    event_frames[std::string(e.find("action")->as_string()) + "@" + std::to_string(e.find("addr")->as_uint64())] =
        describe(*e.find("frames"));
  }
  const std::string freed_at = std::to_string(reinterpret_cast<std::uintptr_t>(freed));
  EXPECT_EQ(event_frames["alloc@" + std::to_string(reinterpret_cast<std::uintptr_t>(with_stack))], expected);
  EXPECT_EQ(event_frames["alloc@" + freed_at], expected);
  EXPECT_EQ(event_frames["free_completed@" + freed_at], "");  // frees happen elsewhere: no alloc stack
  EXPECT_EQ(event_frames["alloc@" + std::to_string(reinterpret_cast<std::uintptr_t>(without_stack))], "");
}

TEST_F(TorchAllocatorCApi, DumpToAnUnwritablePathFails) {
  EXPECT_EQ(sublet_torch_dump_snapshot("/nonexistent-dir/x/snap.pickle"), -1);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(sublet_torch_dump_snapshot(""), -1);
}

}  // namespace
