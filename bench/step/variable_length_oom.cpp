#include "bench/step/variable_length_oom.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <functional>
#include <memory>
#include <optional>
#include <ostream>

#include "runtime/data/shape_schedule.h"
#include "bench/step/step_bench.h"
#include "core/errors.h"
#include "core/format_bytes.h"
#include "memory/config.h"
#include "memory/registry.h"

namespace sublet::bench {
namespace {

constexpr std::size_t kPage = 2 * memory::kMiB;
constexpr std::size_t kCapSearchPages = 4096;  // how far above the live peak the cap is searched (8 GiB)

std::string bytes(std::size_t b) { return sublet::format_bytes(static_cast<std::int64_t>(b)); }

std::size_t round_up(std::size_t value, std::size_t step) { return (value + step - 1) / step * step; }

// What the allocator held when it gave up, read from its own events (the step's tensors are freed
// by the time the exception is caught).
struct FailureWatch {
  std::int64_t allocated = 0, reserved = 0;
  std::size_t request = 0, allocated_at = 0, reserved_at = 0;
  void on(const memory::AllocatorEvent& e) {
    using Kind = memory::AllocatorEventKind;
    const auto size = static_cast<std::int64_t>(e.size);
    switch (e.kind) {
      case Kind::Alloc: allocated += size; break;
      case Kind::FreeRequested: allocated -= size; break;
      case Kind::SegmentAlloc: case Kind::SegmentMap: reserved += size; break;
      case Kind::SegmentFree: case Kind::SegmentUnmap: reserved -= size; break;
      case Kind::Oom:
        request = e.requested_size;
        allocated_at = static_cast<std::size_t>(allocated);
        reserved_at = static_cast<std::size_t>(reserved);
        break;
      default: break;
    }
  }
};

StepBenchOptions step_options(const VariableLengthOomOptions& o) {
  StepBenchOptions s;
  s.model = o.model;
  s.block_size = o.block_size;
  s.device = o.device;
  s.vocab_size = o.vocab_size;
  s.warmup = 0;
  s.steps = o.steps;
  s.seed = o.seed;
  s.memory_stats_from_start = true;
  s.schedule = std::make_shared<const data::ShapeSchedule>(data::token_schedule(
      {.seed = o.seed, .steps = o.steps, .min_len = o.min_len, .max_len = o.max_len, .tokens_per_batch = o.tokens_per_batch}));
  return s;
}

// One run under `config` on a fresh allocator, capped at `capacity` bytes (0: no cap).
OomDemoRow run_one(const VariableLengthOomOptions& o, const std::string& label, const memory::AllocatorConfig& config,
                   std::size_t capacity) {
  memory::replace_allocator(o.device, memory::make_allocator(o.device, memory::AllocatorKind::Caching, config));
  memory::CachingAllocator& allocator = memory::allocator_for(o.device);
  if (capacity > 0) {
    const std::size_t total = allocator.backend().memory_info().total_bytes;
    if (capacity > total)
      throw ValueError(fmt::format("variable-length-oom: a capacity of {} is more than {} holds ({})", bytes(capacity),
                                   o.device.str(), bytes(total)));
    // A little over the cap, so that the double's rounding never takes the last bytes off it.
    allocator.set_memory_fraction(std::min(1.0, (static_cast<double>(capacity) + 4096.0) / static_cast<double>(total)));
  }
  auto watch = std::make_shared<FailureWatch>();
  allocator.set_observer([watch](const memory::AllocatorEvent& e) { watch->on(e); });
  OomDemoRow row;
  row.label = label;
  row.alloc_conf = config.to_string();
  const StepBenchOptions options = step_options(o);
  try {
    (void)run_step_bench(options);
    row.finished = true;
  } catch (const OutOfMemoryError& e) {
    row.message = e.what();
    row.failed_request = watch->request;
    row.allocated_at_failure = watch->allocated_at;
    row.reserved_at_failure = watch->reserved_at;
  }
  allocator.set_observer(nullptr);
  const auto stats = allocator.memory_stats();
  row.peak_allocated = static_cast<std::size_t>(stats.at("allocated_bytes.all.peak"));
  row.peak_reserved = static_cast<std::size_t>(stats.at("reserved_bytes.all.peak"));
  row.retries = stats.at("num_alloc_retries");
  return row;
}

}  // namespace

std::optional<std::size_t> smallest_finishing_cap(const std::function<bool(std::size_t)>& finishes_at, std::size_t max_steps) {
  std::size_t failed = 0, at = 0;
  bool any_failed = false;
  for (std::size_t step = 1; !finishes_at(at); step *= 2) {
    any_failed = true;
    failed = at;
    if (at >= max_steps) return std::nullopt;
    at = std::min(at + step, max_steps);
  }
  while (any_failed && at - failed > 1) {
    const std::size_t middle = failed + (at - failed) / 2;
    if (finishes_at(middle)) {
      at = middle;
    } else {
      failed = middle;
    }
  }
  return at;
}

bool OomDemoResult::as_expected() const {
  if (rows.size() != 3) return false;
  const OomDemoRow& pytorch = rows[0];
  return !pytorch.finished && pytorch.allocated_at_failure < capacity && rows[1].finished && rows[2].finished;
}

OomDemoResult run_variable_length_oom(const VariableLengthOomOptions& options) {
  const memory::AllocatorConfig knob = memory::AllocatorConfig::parse(options.knob, memory::AllocatorConfig{}, "--knob");
  const memory::AllocatorConfig defaults = memory::default_config(options.device);
  OomDemoResult result;
  result.capacity = options.capacity_bytes;
  std::optional<OomDemoRow> sublet;
  if (result.capacity == 0) {
    // The smallest cap above the live peak under which sublet's defaults finish: the room their
    // layout needs differs between devices and models (the CPU's kernels and cuDNN's workspaces
    // allocate differently), and below that cap the demo would show nothing. The finishing run at
    // that cap is the demo's sublet row.
    result.uncapped_peak_allocated = run_one(options, "calibration", defaults, 0).peak_allocated;
    const std::size_t lowest = round_up(result.uncapped_peak_allocated, kPage) + kPage;
    std::size_t best_pages = kCapSearchPages + 1;
    const auto finishes_at = [&](std::size_t pages) {
      OomDemoRow row = run_one(options, "sublet", defaults, lowest + pages * kPage);
      if (row.finished && pages < best_pages) {
        sublet = std::move(row);
        best_pages = pages;
      }
      return row.finished;
    };
    if (!smallest_finishing_cap(finishes_at, kCapSearchPages))
      throw ValueError(fmt::format("variable-length-oom: sublet's defaults did not finish under any cap up to {} above "
                                   "the live peak; give --capacity-mib",
                                   bytes(kCapSearchPages * kPage)));
    result.capacity = lowest + best_pages * kPage;
  }
  result.rows.push_back(run_one(options, "pytorch", memory::AllocatorConfig{}, result.capacity));
  result.rows.push_back(sublet ? *sublet : run_one(options, "sublet", defaults, result.capacity));
  result.rows.push_back(run_one(options, options.knob, knob, result.capacity));
  return result;
}

int variable_length_oom_demo(const VariableLengthOomOptions& options, std::ostream& out) {
  fmt::print(out, "{} on {}: {} steps, a window length drawn each step from {}..{} (seed {}), about {} tokens "
                  "per step, vocabulary {}\n",
             options.model, options.device.str(), options.steps, options.min_len, options.max_len, options.seed,
             options.tokens_per_batch, options.vocab_size);
  const OomDemoResult r = run_variable_length_oom(options);
  if (r.uncapped_peak_allocated > 0)
    fmt::print(out, "Uncapped, the live tensors peak at {}; the device is capped at {} through a per-process memory "
                    "fraction: the smallest cap in 2 MiB pages above that peak plus one page under which sublet's defaults "
                    "finish.\n\n",
               bytes(r.uncapped_peak_allocated), bytes(r.capacity));
  else
    fmt::print(out, "The device is capped at {} through a per-process memory fraction.\n\n", bytes(r.capacity));
  fmt::print(out, "{:<26} {:<28} {:>10} {:>14} {:>14} {:>8}\n", "setting", "SUBLET_ALLOC_CONF", "outcome", "peak alloc",
             "peak reserved", "retries");
  for (const OomDemoRow& row : r.rows)
    fmt::print(out, "{:<26} {:<28} {:>10} {:>14} {:>14} {:>8}\n", row.label, row.alloc_conf.empty() ? "(none)" : row.alloc_conf,
               row.finished ? "finished" : "OOM", bytes(row.peak_allocated), bytes(row.peak_reserved), row.retries);
  for (const OomDemoRow& row : r.rows) {
    if (row.finished) continue;
    fmt::print(out, "\n{} ran out of memory asking for {} while its live tensors held {} of the {} capacity ({} together); "
                    "{} stayed reserved after the allocator gave back its cache, in segments the request did not fit.\n",
               row.label, bytes(row.failed_request), bytes(row.allocated_at_failure), bytes(r.capacity),
               bytes(row.allocated_at_failure + row.failed_request), bytes(row.reserved_at_failure));
    fmt::print(out, "The error:\n  {}\n", row.message);
  }
  if (!r.as_expected()) {
    fmt::print(out, "\nThis run did not show it: PyTorch's defaults were expected to run out of memory with the live "
                    "tensors below the cap, and the two others to finish. Try another --seed or --capacity-mib.\n");
    return 1;
  }
  fmt::print(out, "\nThe same steps finish under sublet's defaults and under {}: one segment grows with the live "
                  "tensors, so no hole is left that a later, larger request cannot use.\n",
             options.knob);
  return 0;
}

}  // namespace sublet::bench
