// memory_summary(): the table users know from torch.cuda.memory_summary(), same rows and
// columns, same unit rules (a column's unit is chosen from the row's peak so a row reads evenly),
// then sublet's own section: reserved memory split into requested bytes and kinds of waste.
#include <fmt/format.h>

#include <array>
#include <string>

#include "memory/caching_allocator.h"
#include "core/format_bytes.h"

namespace sublet::memory {
namespace {

constexpr int kWidth = 75;

std::string format_size(std::int64_t size, std::int64_t unit_reference) {
  static constexpr std::array<const char*, 6> kPrefixes = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
  std::size_t prefix = 0;
  double reference = static_cast<double>(unit_reference);
  while (prefix + 1 < kPrefixes.size() && reference >= 768.0 * 1024.0) {
    size /= 1024;
    reference /= 1024.0;
    ++prefix;
  }
  return fmt::format("{:6d} {}", size, kPrefixes[prefix]);
}

std::string format_count(std::int64_t count, std::int64_t unit_reference) {
  static constexpr std::array<const char*, 3> kPrefixes = {" ", "K", "M"};
  std::size_t prefix = 0;
  double reference = static_cast<double>(unit_reference);
  while (prefix + 1 < kPrefixes.size() && reference >= 750.0 * 1000.0) {
    count /= 1000;
    reference /= 1000.0;
    ++prefix;
  }
  return fmt::format("{:7d} {} ", count, kPrefixes[prefix]);
}

std::string rule(char c) { return "|" + std::string(kWidth, c) + "|\n"; }

std::string centered(const std::string& text) { return fmt::format("|{:^75}|\n", text); }

void append_family(std::string& out, const std::string& title, const StatArray& stats, bool bytes) {
  const char* const pool_names[] = {"", "      from small pool", "      from large pool"};
  // PyTorch lists the large pool before the small pool.
  for (std::size_t t : {std::size_t{0}, std::size_t{2}, std::size_t{1}}) {
    const Stat& s = stats.by_type[t];
    const std::string name = t == 0 ? title : pool_names[t];
    const auto cell = [&](std::int64_t v) { return bytes ? format_size(v, s.peak) : format_count(v, s.peak); };
    out += fmt::format("| {:<21} | {} | {} | {} | {} |\n", name, cell(s.current), cell(s.peak), cell(s.allocated), cell(s.freed));
  }
  out += rule('-');
}

void append_single(std::string& out, const std::string& title, const Stat& s) {
  const auto cell = [&](std::int64_t v) { return format_count(v, s.peak); };
  out += fmt::format("| {:<21} | {} | {} | {} | {} |\n", title, cell(s.current), cell(s.peak), cell(s.allocated), cell(s.freed));
}

}  // namespace

std::string CachingAllocator::memory_summary() const {
  const DeviceStats s = stats();
  std::string out = "\n" + rule('=');
  out += centered(fmt::format("sublet memory summary, device {} ({} backend)", device().str(), backend_->name()));
  out += rule('-');
  out += fmt::format("|{:^37}|{:^37}|\n", fmt::format("Out-of-memory errors: {}", s.num_ooms),
                     fmt::format("Device alloc retries: {}", s.num_alloc_retries));
  out += rule('=');
  out += "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n";
  out += rule('-');
  append_family(out, "Allocated memory", s.allocated_bytes, true);
  append_family(out, "Active memory", s.active_bytes, true);
  append_family(out, "Requested memory", s.requested_bytes, true);
  append_family(out, "Reserved memory", s.reserved_bytes, true);
  append_family(out, "Non-releasable memory", s.inactive_split_bytes, true);
  append_family(out, "Allocations", s.allocation, false);
  append_family(out, "Active allocs", s.active, false);
  append_family(out, "Reserved segments", s.segment, false);
  append_family(out, "Non-releasable allocs", s.inactive_split, false);
  append_single(out, "Oversize allocations", s.oversize_allocations);
  append_single(out, "Oversize segments", s.oversize_segments);
  out += rule('=');
  out += waste_summary_section(waste(), waste_at_peak());
  return out;
}

}  // namespace sublet::memory
