#include "bench/step/step_report.h"

#include <fmt/format.h>

#include "core/format_bytes.h"

namespace sublet::bench {

namespace {

// The input shape, or "varies" under a shape schedule (its description follows the table).
std::string input_column(const StepBenchResult& r) {
  if (r.options.schedule) return "varies";
  return r.language_model ? fmt::format("seq {}", r.seq_len) : r.options.input.str();
}

}  // namespace

void print_step_table(const std::vector<StepBenchResult>& results, std::ostream& out) {
  out << fmt::format("{:<10} {:<7} {:>6} {:>10} {:>9} {:>8} {:>11} {:>10} {:>14} {:>14} {:>8} {:>6} {:>12}\n", "model",
                     "device", "batch", "input", "precision", "threads", "ms/step", "img/s", "peak alloc",
                     "peak reserved", "alloc", "graph", "driver/step");
  for (const auto& r : results) {
    // "bf16+cl": the precision, and "+cl" for a channels-last run.
    const std::string precision = std::string(amp::precision_name(r.options.precision)) +
                                  (r.options.memory_format == MemoryFormat::ChannelsLast ? "+cl" : "");
    out << fmt::format("{:<10} {:<7} {:>6} {:>10} {:>9} {:>8} {:>11.2f} {:>10.1f} {:>14} {:>14} {:>8} {:>6} {:>12.1f}\n",
                       r.options.model, r.options.device.str(),
                       r.options.schedule ? "varies" : std::to_string(r.options.batch_size), input_column(r), precision,
                       r.threads, r.ms_per_step, r.img_per_s,
                       sublet::format_bytes(static_cast<std::int64_t>(r.peak_allocated_bytes)),
                       sublet::format_bytes(static_cast<std::int64_t>(r.peak_reserved_bytes)),
                       memory::allocator_kind_name(r.options.allocator), r.options.cuda_graph ? "yes" : "no",
                       r.device_allocs_per_step);
  }
  out << "ms/step: median over the timed steps (forward, cross-entropy, backward, SGD step, zero_grad); "
         "peaks: over the timed steps (with a graph: allocated = the capture's live peak, reserved = what the replays "
         "hold); driver/step: backend allocation "
         "calls per timed step\n";
  for (const auto& r : results) {
    if (!r.options.schedule) continue;
    out << fmt::format("{}: inputs {} over {} timed steps: {:.3f} us per {} (the timed steps' wall time over their {} {}s)\n",
                       r.options.model, r.options.schedule->describe(), r.options.steps, r.us_per_sample,
                       r.language_model ? "token" : "image", r.timed_samples, r.language_model ? "token" : "image");
  }
  for (const auto& r : results) {
    if (!r.language_model || r.options.schedule) continue;
    out << fmt::format("{}: batch {} x {} tokens, {:.0f} tokens/s, {:.3g} model FLOPs per token (6N + attention){}\n",
                       r.options.model, r.options.batch_size, r.seq_len, r.tokens_per_s, r.flops_per_token,
                       r.mfu > 0 ? fmt::format(", MFU {:.1f}% of 989 TFLOP/s (dense bf16, H100/H200 SXM)", 100.0 * r.mfu)
                                 : std::string());
  }
  for (const auto& r : results) {
    const MemoryPlanReport& p = r.plan_report;
    if (!r.options.cuda_graph || p.plan != MemoryPlan::Static) continue;
    out << fmt::format("static plan ({} bs{}): arena {} for a lower bound of {} ({:.4f}x, {}); {} of {} requests served "
                       "from it{}; setup peak reserved {}\n",
                       r.options.model, r.options.batch_size, sublet::format_bytes(static_cast<std::int64_t>(p.arena_bytes)),
                       sublet::format_bytes(static_cast<std::int64_t>(p.lower_bound_bytes)),
                       p.lower_bound_bytes ? static_cast<double>(p.arena_bytes) / static_cast<double>(p.lower_bound_bytes) : 0.0,
                       p.heuristic, p.served, p.requests, p.abandoned.empty() ? "" : "; plan abandoned at " + p.abandoned,
                       sublet::format_bytes(static_cast<std::int64_t>(r.setup_peak_reserved_bytes)));
    if (p.probe_reserved_left > 0)
      out << fmt::format("  the probe capture's pool still held {} when the arena was taken ({})\n",
                         sublet::format_bytes(static_cast<std::int64_t>(p.probe_reserved_left)), p.probe_held);
  }
}

nlohmann::json step_json(const StepBenchResult& r) {
  nlohmann::json j = {{"framework", "sublet"},
          {"model", r.options.model},
          {"device", r.options.device.str()},
          {"batch_size", r.options.batch_size},
          {"input", input_column(r)},
          {"classes", r.options.num_classes},
          {"threads", r.threads},
          {"ms_per_step", r.ms_per_step},
          {"cpu_ms_per_step", r.cpu_ms_per_step},
          {"img_per_s", r.img_per_s},
          {"peak_allocated_bytes", r.peak_allocated_bytes},
          {"peak_reserved_bytes", r.peak_reserved_bytes},
          {"steps", r.options.steps},
          {"warmup", r.options.warmup},
          {"step_ms", r.step_ms},
          {"allocator", memory::allocator_kind_name(r.options.allocator)},
          {"cuda_graph", r.options.cuda_graph},
          {"precision", amp::precision_name(r.options.precision)},
          {"memory_format", memory_format_name(r.options.memory_format)},
          {"device_allocs_per_step", r.device_allocs_per_step},
          {r.language_model ? "us_per_token" : "us_per_image", r.us_per_sample}};
  if (r.options.schedule) {
    j["shape_schedule"] = r.options.schedule->describe();
    j["timed_samples"] = r.timed_samples;
  }
  if (r.language_model) {
    j["seq_len"] = r.seq_len;  // the longest under a schedule
    j["vocab_size"] = r.options.vocab_size;
    j["tokens_per_s"] = r.tokens_per_s;
    j["flops_per_token"] = r.flops_per_token;
    j["mfu"] = r.mfu;
  }
  if (r.recompute) {
    const models::RecomputeReport& c = *r.recompute;
    j["memory_budget"] = {{"text", r.options.memory_budget},
                          {"budget_bytes", c.budget_bytes},
                          {"baseline_peak_bytes", c.baseline_peak},
                          {"predicted_peak_bytes", c.predicted_peak},
                          {"measured_peak_bytes", c.measured_peak},
                          {"recompute_ms", c.recompute_ms},
                          {"forward_ms", c.forward_ms},
                          {"recomputed", models::describe_runs(c.units, c.runs)},
                          {"units", models::units_json(c.units)}};
  }
  if (r.options.cuda_graph) {
    const MemoryPlanReport& p = r.plan_report;
    j["memory_plan"] = memory_plan_name(p.plan);
    j["setup_peak_reserved_bytes"] = r.setup_peak_reserved_bytes;
    j["reserved_before_capture_bytes"] = p.reserved_before_capture;
    j["reserved_at_capture_bytes"] = p.reserved_at_capture;
    if (p.plan == MemoryPlan::Static) {
      j["lower_bound_bytes"] = p.lower_bound_bytes;
      j["planned_arena_bytes"] = p.arena_bytes;
      j["plan_heuristic"] = p.heuristic;
      j["plan_requests"] = p.requests;
      j["plan_served"] = p.served;
      j["plan_abandoned"] = p.abandoned;
    }
  }
  return j;
}

nlohmann::json step_json(const std::vector<StepBenchResult>& results) {
  if (results.size() == 1) return step_json(results.front());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : results) list.push_back(step_json(r));
  return list;
}

}  // namespace sublet::bench
