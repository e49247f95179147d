#pragma once
// An out-of-memory that is not a lack of memory: a GPT (gpt-nano by default) trains on a new window length every step
// (a seeded schedule, as `sublet bench step --seq-len-range` draws it) on a device capped just
// above what its live tensors need at most. Under PyTorch's default settings (fixed segments) the
// changing sizes leave holes no later request fits, and the run stops with OutOfMemoryError while
// the live tensors are far below the cap; under sublet's defaults and under the knob that fixes it
// (expandable_segments:True) the same steps finish. The same code runs on the CPU (host memory
// through the caching allocator) and on a GPU; the cap is a per-process memory fraction, as
// torch.cuda.set_per_process_memory_fraction sets one. The runs are bench step's GPT step
// (run_step_bench), which is why this lives beside it.
//
//   sublet demo variable-length-oom --device cpu
//   sublet demo variable-length-oom --device cuda --model gpt-mini --block-size 1024 --seq-len-range 64:1024 --tokens-per-batch 16384 --vocab 50304
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"

namespace sublet::bench {

struct VariableLengthOomOptions {
  Device device = Device::cpu();
  std::string model = "gpt-nano";  // gpt-nano or gpt-mini
  std::int64_t block_size = 0;     // the context (0: the model's); at least max_len
  std::int64_t vocab_size = 4096;  // the logits (tokens x vocabulary) are the largest tensors
  std::int64_t min_len = 8, max_len = 64, tokens_per_batch = 2048;
  std::int64_t steps = 12;
  std::uint64_t seed = 0;
  // 0: the smallest cap under which sublet's defaults finish, in 2 MiB pages above the live peak
  // of an uncapped run rounded up to a page (the search doubles its step until they finish, then
  // bisects): room for every live tensor, with almost nothing to spare.
  std::size_t capacity_bytes = 0;
  std::string knob = "expandable_segments:True";  // the setting that fixes it (SUBLET_ALLOC_CONF syntax)
};

struct OomDemoRow {
  std::string label;        // "pytorch", "sublet", or the knob
  std::string alloc_conf;   // the configuration's text ("" for PyTorch's defaults)
  bool finished = false;
  std::size_t peak_allocated = 0, peak_reserved = 0;
  std::int64_t retries = 0;  // num_alloc_retries: cache releases before a retry
  // At the failure (finished == false): the request, the live tensors' bytes and what stayed
  // reserved after the allocator gave back its cache, and the error's message.
  std::size_t failed_request = 0, allocated_at_failure = 0, reserved_at_failure = 0;
  std::string message;
};

struct OomDemoResult {
  std::size_t capacity = 0;
  std::size_t uncapped_peak_allocated = 0;  // the calibration run's (0 when the capacity was given)
  std::vector<OomDemoRow> rows;             // pytorch, sublet, the knob
  // The outcome the demo shows: PyTorch's defaults fail with the live tensors below the capacity,
  // the two others finish.
  bool as_expected() const;
};

OomDemoResult run_variable_length_oom(const VariableLengthOomOptions& options);

// The smallest step in 0..max_steps at which finishes_at holds, assuming it holds from some step
// on: doubles the stride until it holds, then bisects (about 2 log2 of the answer calls); nullopt
// when it does not hold at max_steps. The cap search above the live peak, in pages.
std::optional<std::size_t> smallest_finishing_cap(const std::function<bool(std::size_t)>& finishes_at, std::size_t max_steps);

// Runs it and prints the transcript; 0 when the outcome is the expected one, 1 otherwise (with why).
int variable_length_oom_demo(const VariableLengthOomOptions& options, std::ostream& out);

}  // namespace sublet::bench
