#include "profile/summary_report.h"

#include <cmath>

#include <fmt/format.h>

#include "analysis/replay.h"
#include "analysis/static_plan.h"

#include <numeric>

#include "core/format_bytes.h"

namespace sublet::profile {
namespace {

std::string b(std::int64_t bytes) { return sublet::format_bytes(bytes); }
std::string sb(std::int64_t bytes) { return fmt::format("{}{}", bytes < 0 ? "-" : "+", b(bytes < 0 ? -bytes : bytes)); }

const LayerRow* find_row(const std::vector<LayerRow>& rows, int step, const std::string& module, Phase phase) {
  for (const LayerRow& r : rows)
    if (r.step == step && r.module == module && r.phase == phase) return &r;
  return nullptr;
}

// The innermost span that holds the step's peak.
const LayerRow* peak_holder(const std::vector<LayerRow>& rows, const StepPeak& peak) {
  const LayerRow* holder = nullptr;
  for (const LayerRow& r : rows)
    if (r.step == peak.step && r.holds_step_peak && r.begin_event <= peak.peak_event && peak.peak_event < r.end_event &&
        (!holder || r.end_event - r.begin_event < holder->end_event - holder->begin_event))
      holder = &r;
  return holder;
}

double fragmentation_of(const std::vector<memory::SegmentInfo>& segments, std::int64_t* largest, std::int64_t* free_total) {
  *largest = 0;
  *free_total = 0;
  for (const auto& s : segments)
    for (const auto& blk : s.blocks)
      if (blk.state == memory::BlockInfo::State::Inactive) {
        *largest = std::max<std::int64_t>(*largest, static_cast<std::int64_t>(blk.size));
        *free_total += static_cast<std::int64_t>(blk.size);
      }
  return *free_total == 0 ? 0.0 : 1.0 - static_cast<double>(*largest) / static_cast<double>(*free_total);
}

// Reserved memory by use at the step's peak and at the reserved peak (memory/waste.h).
std::string waste_lines(int step, const ReplayedState& state) {
  const memory::WasteSplit& at = state.waste;
  const memory::WasteSplit& res = state.waste_at_reserved_peak;
  const auto u = [](std::size_t v) { return b(static_cast<std::int64_t>(v)); };
  std::string out = "Reserved memory by use (reserved = requested + rounding + holes + free segments + mapped but unused)\n";
  out += fmt::format("  {:<46} {:>14} {:>14}\n", "", fmt::format("step {} peak", step), "reserved peak");
  const auto row = [&](const char* name, std::size_t a, std::size_t r) {
    out += fmt::format("  {:<46} {:>14} {:>14}\n", name, u(a), u(r));
  };
  row("requested by live tensors", at.requested, res.requested);
  row("rounding (live blocks beyond their request)", at.rounding, res.rounding);
  row("holes (free blocks in segments with live ones)", at.holes.all(), res.holes.all());
  row("  of which in the large pool", at.holes.large_pool, res.holes.large_pool);
  row("free segments (no live block)", at.free_segments.all(), res.free_segments.all());
  row("mapped but unused (expandable segments)", at.mapped_unused, res.mapped_unused);
  row("reserved", at.reserved, res.reserved);
  if (at.wasted() != 0)
    out += fmt::format("  largest kind at the step's peak: {}\n", memory::waste_kind_name(at.largest()));
  return out + "\n";
}

// Mean and standard deviation of step times.
struct StepTimes {
  double mean = 0, sd = 0;
  std::size_t n = 0;
};

StepTimes spread_of(const std::vector<double>& times) {
  StepTimes t;
  t.n = times.size();
  for (double v : times) t.mean += v / static_cast<double>(t.n);
  for (double v : times) t.sd += (v - t.mean) * (v - t.mean);
  t.sd = t.n > 1 ? std::sqrt(t.sd / static_cast<double>(t.n - 1)) : 0.0;
  return t;
}

std::string describe_steps(const StepTimes& t) {
  return t.n > 1 ? fmt::format("{:.2f} ms (mean of {}, sd {:.2f})", t.mean, t.n, t.sd) : fmt::format("{:.2f} ms (one step)", t.mean);
}

}  // namespace

// The overhead with its noise: two standard errors of the ratio of the means, so that a
// difference inside them (negative ones included) reads as "within the noise", not as a figure.
std::string overhead_line(const std::vector<double>& profiled_ms, const std::vector<double>& plain_ms) {
  if (profiled_ms.empty()) return "no profiled step after the first was timed";
  const StepTimes profiled = spread_of(profiled_ms);
  if (plain_ms.empty()) return "profiled step " + describe_steps(profiled) + "; the unprofiled step was not measured (--timing-steps 0)";
  const StepTimes plain = spread_of(plain_ms);
  std::string line = "profiled step " + describe_steps(profiled) + ", unprofiled step " + describe_steps(plain) + ": ";
  const double overhead = 100.0 * (profiled.mean / plain.mean - 1.0);
  if (profiled.n < 2 || plain.n < 2)
    return line + fmt::format("{:+.1f}% from single steps, with no estimate of the noise (take --steps 3 and --timing-steps 2 or more)", overhead);
  const double relative_error = std::sqrt(std::pow(profiled.sd / profiled.mean, 2) / static_cast<double>(profiled.n) +
                                          std::pow(plain.sd / plain.mean, 2) / static_cast<double>(plain.n));
  const double noise = 200.0 * relative_error * profiled.mean / plain.mean;
  if (std::abs(overhead) <= noise) return line + fmt::format("within the noise ({:+.1f}% +- {:.1f}%)", overhead, noise);
  return line + fmt::format("{:+.1f}% +- {:.1f}% (two standard errors)", overhead, noise);
}

StaticEstimate static_estimate(const ProfileRun& run) {
  StaticEstimate e;
  e.parameters = static_cast<std::int64_t>(run.parameter_bytes);
  e.gradients = e.parameters;
  e.optimizer_state = run.optimizer_state_per_parameter * e.parameters;
  const auto& shape = run.options.input_shape;
  const std::int64_t pixels = std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
  // GPT: token ids and next-token targets, both int64 [B, T]; images: float32 images and int64 labels.
  e.input = run.options.seq_len > 0
                ? 2 * run.options.batch_size * pixels * static_cast<std::int64_t>(sizeof(std::int64_t))
                : run.options.batch_size * pixels * static_cast<std::int64_t>(sizeof(float)) +
                      run.options.batch_size * static_cast<std::int64_t>(sizeof(std::int64_t));
  return e;
}

namespace {

// What `sublet plan` would say of the last step's own requests, and what --memory-budget recomputes.
std::string memory_plan_lines(const ProfileRun& run, int step) {
  const StepRecord* record = nullptr;
  for (const StepRecord& r : run.steps)
    if (r.step == step) record = &r;
  if (!record || record->end_event > run.events.size()) return "";
  const std::vector<memory::HistoryEvent> events(run.events.begin() + static_cast<std::ptrdiff_t>(record->begin_event),
                                                 run.events.begin() + static_cast<std::ptrdiff_t>(record->end_event));
  const memory::StaticPlan plan = memory::plan_static_arena(memory::trace_from_history(events));
  std::string out = fmt::format("Memory plan of step {}'s own requests (what `--cuda-graph --memory-plan static` would serve them from)\n", step);
  out += fmt::format("  lower bound (most bytes live at once) {}; static arena {} ({:.3f}x, {})\n", b(static_cast<std::int64_t>(plan.lower_bound)),
                     b(static_cast<std::int64_t>(plan.arena_bytes)),
                     plan.lower_bound ? static_cast<double>(plan.arena_bytes) / static_cast<double>(plan.lower_bound) : 0.0,
                     plan.heuristic);
  if (!run.options.recomputed.empty())
    out += fmt::format("  recomputed in backward (--memory-budget): {}; their second forward is in the 'recompute' rows\n",
                       run.options.recomputed);
  return out + "\n";
}

}  // namespace

std::string summary_report(const ProfileRun& run, const std::vector<LayerRow>& rows, const ReplayedState& peak_state,
                           const StepDiff* diff) {
  const ProfileOptions& o = run.options;
  const Accounting& a = run.accounting;
  const std::vector<StepPeak> peaks = step_peaks(run);
  const StepPeak& last = peaks.back();
  const int n = last.step;
  std::string out;
  const std::string input = o.seq_len > 0 ? fmt::format("{} tokens", o.seq_len) : fmt::format("{}", fmt::join(o.input_shape, "x"));
  out += fmt::format("sublet profile: {} on {} ({} backend), batch {}, input {}, {} {}, {} optimizer, {} steps\n",
                     o.model_name, o.device.str(), run.backend_name, o.batch_size, input, o.num_classes,
                     o.seq_len > 0 ? "vocabulary" : "classes", o.optimizer, o.steps);
  out += fmt::format("allocator configuration: {} ({})\n\n", run.allocator_config.empty() ? "default" : run.allocator_config,
                     run.allocator_config_origin);

  out += "Step peaks (allocated = bytes in live blocks; reserved = segments held from the device)\n";
  out += fmt::format("  {:>4} {:>14} {:>14} {:>14} {:>14}  {}\n", "step", "peak allocated", "peak reserved", "at start", "at end", "peak reached in");
  for (const StepPeak& p : peaks) {
    const LayerRow* h = peak_holder(rows, p);
    out += fmt::format("  {:>4} {:>14} {:>14} {:>14} {:>14}  {}\n", p.step, b(p.peak_allocated), b(p.peak_reserved),
                       b(p.allocated_at_start), b(p.allocated_at_end), h ? h->module + " " + phase_name(h->phase) : "-");
  }
  if (const LayerRow* h = peak_holder(rows, last)) {
    out += fmt::format("  Step {}'s peak adds up per layer: {} {} starts at {} and rises {} above that: {} + {} = {}.\n", n,
                       h->module, phase_name(h->phase), b(h->allocated_at_entry), b(h->peak_above_entry),
                       b(h->allocated_at_entry), b(h->peak_above_entry), b(h->peak()));
  }
  out += "\n";
  out += memory_plan_lines(run, n);

  // Measured figures of the last step at the moments that matter.
  const LayerRow* forward = nullptr;
  for (const LayerRow& r : rows)
    if (r.step == n && r.depth == 0 && !r.type.empty() && r.phase == Phase::Forward) forward = &r;
  const LayerRow* opt_step = find_row(rows, n, "(optimizer.step)", Phase::Optimizer);
  const CategoryBytes at_forward_end = forward ? a.live_by_category_at(forward->end_event) : CategoryBytes{};
  const CategoryBytes at_backward_end = opt_step ? a.live_by_category_at(opt_step->begin_event) : CategoryBytes{};
  const CategoryBytes at_end = a.live_by_category_at(run.steps.back().end_event);
  const CategoryBytes at_peak = a.live_by_category_at(last.peak_event + 1);
  const auto cat = [](Category c) { return index_of(c); };
  const StaticEstimate e = static_estimate(run);

  out += fmt::format("Static estimate vs measured (step {})\n", n);
  out += fmt::format("  {:<34} {:>12} {:>12} {:>12}  {}\n", "", "estimate", "measured", "difference", "measured when");
  const auto line = [&](const std::string& what, std::int64_t estimate, std::int64_t measured, const std::string& when) {
    out += fmt::format("  {:<34} {:>12} {:>12} {:>12}  {}\n", what, estimate >= 0 ? b(estimate) : "-", b(measured),
                       estimate >= 0 ? sb(measured - estimate) : "-", when);
  };
  line(fmt::format("parameters ({} tensors)", run.parameter_count), e.parameters, at_end[cat(Category::Parameter)], "end of step");
  line("gradients (one per parameter)", e.gradients, at_backward_end[cat(Category::Gradient)], "end of backward");
  line(fmt::format("optimizer state ({}x parameters)", run.optimizer_state_per_parameter), e.optimizer_state,
       at_end[cat(Category::OptimizerState)], "end of step");
  line("input batch and labels", e.input, at_forward_end[cat(Category::Input)], "end of forward");
  line("activations saved for backward", -1, at_forward_end[cat(Category::Activation)], "end of forward");
  const std::int64_t forward_level = std::accumulate(at_forward_end.begin(), at_forward_end.end(), std::int64_t{0});
  const std::int64_t estimate_level = e.parameters + e.optimizer_state + e.input + at_forward_end[cat(Category::Activation)];
  line("end-of-forward level (p+o+in+act)", estimate_level, forward_level, "end of forward");
  out += "  Differences explained:\n";
  const auto rounding = static_cast<std::int64_t>(run.parameter_block_bytes) - e.parameters;
  out += fmt::format("   - rounding: every block is a multiple of 512 B; the {} parameter tensors take {} in blocks for {} of data "
                     "({} of padding), and the same for each gradient and state tensor.\n",
                     run.parameter_count, b(static_cast<std::int64_t>(run.parameter_block_bytes)), b(e.parameters), b(rounding));
  if (run.buffer_bytes > 0)
    out += fmt::format("   - buffers: the model's buffers (BatchNorm running statistics, {}) are counted as parameters.\n",
                       b(static_cast<std::int64_t>(run.buffer_bytes)));
  out += fmt::format("   - at the end of forward, besides parameters, state, input and saved activations: temporaries {}, "
                     "workspaces {}, gradients {} (zero_grad runs at the start of a step, so none should be left).\n",
                     b(at_forward_end[cat(Category::Temporary)]), b(at_forward_end[cat(Category::Workspace)]),
                     b(at_forward_end[cat(Category::Gradient)]));
  out += fmt::format("   - the peak ({}) lies {} above the end-of-forward level; live at the peak:", b(last.peak_allocated),
                     sb(last.peak_allocated - forward_level));
  for (std::size_t c = 0; c < kNumCategories; ++c)
    if (at_peak[c] != 0) out += fmt::format(" {} {}", category_label(Category(c)), b(at_peak[c]));
  out += fmt::format(".\n     Compared with the end of forward: activations {}, gradients {}, temporaries {}, workspaces {}.\n",
                     sb(at_peak[cat(Category::Activation)] - at_forward_end[cat(Category::Activation)]),
                     sb(at_peak[cat(Category::Gradient)] - at_forward_end[cat(Category::Gradient)]),
                     sb(at_peak[cat(Category::Temporary)] - at_forward_end[cat(Category::Temporary)]),
                     sb(at_peak[cat(Category::Workspace)] - at_forward_end[cat(Category::Workspace)]));
  out += fmt::format("   - caching: at the peak the allocator reserves {} for {} allocated; {} is cached in free blocks "
                     "(reserved never shrinks without empty_cache()).\n",
                     b(static_cast<std::int64_t>(peak_state.reserved)), b(static_cast<std::int64_t>(peak_state.allocated)),
                     b(static_cast<std::int64_t>(peak_state.reserved - peak_state.allocated)));
  out += "\n";

  std::int64_t largest_end = 0, free_end = 0;
  const double fragmentation_end = fragmentation_of(run.final_segments, &largest_end, &free_end);
  out += "Fragmentation (1 - largest free block / free reserved memory)\n";
  out += fmt::format("  at step {}'s peak: {:.1f}% (largest free block {}, free reserved {})\n", n, 100.0 * peak_state.fragmentation,
                     b(static_cast<std::int64_t>(peak_state.largest_free_block)),
                     b(static_cast<std::int64_t>(peak_state.reserved - peak_state.allocated)));
  out += fmt::format("  at the end:         {:.1f}% (largest free block {}, free reserved {})\n\n", 100.0 * fragmentation_end,
                     b(largest_end), b(free_end));

  out += waste_lines(n, peak_state);

  if (diff) out += "Step " + std::to_string(diff->later) + " against step " + std::to_string(diff->earlier) + "\n" + format_step_diff(*diff) + "\n";

  out += "Overhead of profiling (hooks on every module and the allocation history)\n";
  out += "  " + overhead_line(run.profiled_step_times_ms, run.plain_step_times_ms) + "\n";
  out += fmt::format("  history: {} events\n\n", run.events.size());

  out += fmt::format("memory_summary() at step {}'s peak (rebuilt by replaying the history; reserved peak {}):\n", n,
                     b(static_cast<std::int64_t>(peak_state.peak_reserved)));
  out += peak_state.summary + "\n";
  out += "memory_summary() at the end of the run:\n" + run.summary_at_end;
  return out;
}

}  // namespace sublet::profile
