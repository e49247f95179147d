// memory_summary() has the layout users know, with the right numbers; MemoryMonitor reports.
#include <gtest/gtest.h>

#include <sstream>

#include "alloc_test_support.h"
#include "core/format_bytes.h"
#include "memory/monitor.h"

using namespace sublet::memory;
using sublet::format_bytes;
using sublet::memory::testing::SimulatedAllocator;

namespace {
std::string line_starting(const std::string& text, const std::string& start) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(start, 0) == 0) return line;
  return "";
}
}  // namespace

TEST(MemorySummary, HasEveryRowAndColumn) {
  SimulatedAllocator a(1024 * kMiB);
  const std::string summary = a.allocator.memory_summary();
  for (const char* row : {"Allocated memory", "Active memory", "Requested memory", "Reserved memory",
                          "Non-releasable memory", "Allocations", "Active allocs", "Reserved segments",
                          "Non-releasable allocs", "from large pool", "from small pool", "Oversize allocations",
                          "Oversize segments", "Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed",
                          "Out-of-memory errors: 0", "Device alloc retries: 0", "cuda:0 (simulated backend)"})
    EXPECT_NE(summary.find(row), std::string::npos) << row << "\n" << summary;
}

TEST(MemorySummary, ShowsCurrentPeakAndTotals) {
  SimulatedAllocator a(1024 * kMiB);
  Block* x = a.allocator.allocate(8 * kMiB);
  Block* y = a.allocator.allocate(4 * kMiB);
  a.allocator.free(y);
  const std::string summary = a.allocator.memory_summary();
  // Cur 8 MiB, peak 12 MiB, 12 MiB allocated in total, 4 MiB freed; a row's unit follows its peak.
  EXPECT_EQ(line_starting(summary, "| Allocated memory"),
            "| Allocated memory      |   8192 KiB |  12288 KiB |  12288 KiB |   4096 KiB |");
  EXPECT_EQ(line_starting(summary, "| Reserved memory"),
            "| Reserved memory       |  20480 KiB |  20480 KiB |  20480 KiB |      0 KiB |");
  EXPECT_EQ(line_starting(summary, "| Allocations"),
            "| Allocations           |       1    |       2    |       2    |       1    |");
  a.allocator.free(x);
}

TEST(FormatBytes, PicksReadableUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(20 * 1024 * 1024), "20.00 MiB");
  EXPECT_EQ(format_bytes(std::int64_t{3} << 30), "3.00 GiB");
}

TEST(MemoryMonitor, PrintsPeakAndCurrentOnScopeExit) {
  std::ostringstream out;
  CachingAllocator& cpu = allocator_for(sublet::Device::cpu());
  Block* kept = nullptr;
  {
    sublet::MemoryMonitor monitor("train_step", sublet::Device::cpu(), out);
    Block* temp = cpu.allocate(512 * kMiB);
    kept = cpu.allocate(256 * kMiB);
    cpu.free(temp);
    EXPECT_GE(monitor.peak_bytes(), 768 * kMiB);
  }
  const std::string report = out.str();
  EXPECT_EQ(report.rfind("[memory] train_step: peak 0.750 GiB, current 0.250 GiB", 0), 0u) << report;
  cpu.free(kept);
}
