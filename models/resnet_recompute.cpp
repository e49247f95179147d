#include "models/resnet_recompute.h"

#include <cmath>

#include "core/json_excerpt.h"
#include "core/printable.h"
#include "models/measured_budget.h"

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>

#include <fmt/format.h>

#include "core/errors.h"
#include "core/format_bytes.h"
#include "ops/copy.h"
#include "runtime/autograd/function.h"
#include "runtime/device_memory.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"
#include "runtime/nn/checkpoint.h"
#include "runtime/nn/functional.h"
#include "runtime/shape.h"

namespace sublet::models {
namespace {

// The batch-norm running statistics a measured pass updates, put back when it is done. Kept in
// host memory outside the allocator, so that the measured peaks hold only what the step holds.
class BufferRestorer {
 public:
  explicit BufferRestorer(ResNet& model) : buffers_(model.buffers()) {
    for (const Tensor& b : buffers_) {
      if (!b.is_contiguous()) throw Error("measure_blocks: expected contiguous model buffers");
      std::vector<std::byte>& copy = saved_.emplace_back(static_cast<std::size_t>(b.nbytes()));
      ops::copy_bytes(Device::cpu(), copy.data(), b.device(), b.data_ptr(), copy.size());
    }
  }
  ~BufferRestorer() {
    for (std::size_t i = 0; i < buffers_.size(); ++i)
      ops::copy_bytes(buffers_[i].device(), buffers_[i].data_ptr(), Device::cpu(), saved_[i].data(), saved_[i].size());
  }
  BufferRestorer(const BufferRestorer&) = delete;
  BufferRestorer& operator=(const BufferRestorer&) = delete;

 private:
  std::vector<Tensor> buffers_;
  std::vector<std::vector<std::byte>> saved_;
};

void drop_gradients(ResNet& model) {
  for (Tensor& p : model.parameters()) p.set_grad(Tensor());
}

std::size_t forward_backward_peak(ResNet& model, const Tensor& images, const Tensor& labels) {
  const Device device = images.device();
  synchronize(device);
  reset_peak_memory_stats(device);
  {
    Tensor loss = nn::functional::cross_entropy(model(images), labels);
    loss.backward();
  }
  synchronize(device);
  const std::size_t peak = max_memory_allocated(device);
  drop_gradients(model);
  return peak;
}

std::size_t gradient_bytes(const std::vector<Tensor>& parameters) {
  std::size_t bytes = 0;
  for (const Tensor& p : parameters) bytes += static_cast<std::size_t>(p.nbytes());
  return bytes;
}

// Unit k on its own, recomputed as a run of one (nn::checkpoint: the forward without saving, then
// the gradient of its output, the recomputation and its backward): the most bytes live above what
// was allocated before, its input excluded (the unit before keeps it). Twice, the first pass
// unmeasured (cuDNN's choices for new pointer alignments: see measure_step_peak). Each unit's
// input comes from the one before, under no grad.
std::vector<std::size_t> measure_unit_backward_bytes(ResNet& model, const Tensor& images) {
  const Device device = images.device();
  std::vector<std::size_t> bytes;
  for (int pass = 0; pass < 2; ++pass) {
    bytes.clear();
    Tensor x = images;
    std::size_t unit = 0;
    auto measure = [&](const std::function<Tensor(const Tensor&)>& checkpointed, const Tensor& input) {
      synchronize(device);
      const std::size_t before = memory_allocated(device);
      reset_peak_memory_stats(device);
      {
        Tensor y = checkpointed(input);
        autograd::TensorList roots, grads;
        grads.push_back(ones(y.sizes(), y.options()));
        roots.push_back(std::move(y));
        autograd::backward_releasing(std::move(roots), std::move(grads));
      }
      synchronize(device);
      bytes.push_back(max_memory_allocated(device) - before);
      drop_gradients(model);
      ++unit;
    };
    model.set_recompute_stem(true);
    measure([&](const Tensor& in) { return model.forward_stem(in); }, images);
    model.set_recompute_stem(false);
    {
      NoGradGuard no_grad;
      x = model.forward_stem(images);
    }
    for (const auto& stage : model.stages) {
      for (std::size_t b = 0; b < stage->size(); ++b) {
        const std::shared_ptr<nn::Module>& block = (*stage)[b];
        const Tensor input = x.detach().requires_grad_(true);
        measure([&](const Tensor& in) { return nn::checkpoint(block, in); }, input);
        NoGradGuard no_grad;
        x = (*block)(x);
      }
    }
  }
  return bytes;
}

}  // namespace

BlockMeasurement measure_blocks(ResNet& model, const Tensor& images, const Tensor& labels,
                                std::size_t optimizer_state_bytes) {
  if (!model.is_training()) throw Error("measure_blocks: the model must be in training mode");
  const Device device = images.device();
  BufferRestorer restore(model);
  apply_recompute(model, {});
  forward_backward_peak(model, images, labels);  // cuDNN's algorithm choice, workspaces (twice: see
  forward_backward_peak(model, images, labels);  // measure_step_peak)

  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  };
  BlockMeasurement m;
  synchronize(device);
  reset_peak_memory_stats(device);
  const std::size_t before_forward = memory_allocated(device);  // parameters, buffers, the batch
  {
    const auto forward_start = Clock::now();
    synchronize(device);
    const std::size_t before_stem = memory_allocated(device);
    Tensor x = model.forward_stem(images);
    synchronize(device);
    const std::size_t after_stem = memory_allocated(device);
    m.units.push_back({.name = "stem", .group = 0, .retained_bytes = after_stem > before_stem ? after_stem - before_stem : 0,
                       .output_bytes = x.nbytes(), .forward_ms = ms_since(forward_start)});
    for (std::size_t s = 0; s < model.stages.size(); ++s) {
      nn::Sequential& stage = *model.stages[s];
      for (std::size_t b = 0; b < stage.size(); ++b) {
        synchronize(device);
        const std::size_t before = memory_allocated(device);
        const auto start = Clock::now();
        Tensor y = (*stage[b])(x);
        synchronize(device);
        const double ms = ms_since(start);
        const std::size_t after = memory_allocated(device);
        m.units.push_back({.name = "layer" + std::to_string(s + 1) + "." + std::to_string(b),
                           .group = static_cast<int>(s + 1),
                           .retained_bytes = after > before ? after - before : 0,
                           .output_bytes = y.nbytes(),
                           .forward_ms = ms});
        x = y;
      }
    }
    Tensor loss = nn::functional::cross_entropy(model.forward_head(x), labels);
    synchronize(device);
    m.forward_ms = ms_since(forward_start);
    x = Tensor();  // as in the step: the last block's output lives on only where backward needs it
    loss.backward();
  }
  synchronize(device);
  m.baseline_peak = max_memory_allocated(device) + optimizer_state_bytes;
  drop_gradients(model);

  // Each unit's backward, plus the gradients of the parameters after it (the head's included):
  // by the time a unit's backward runs in the step, those exist.
  m.fixed_bytes = before_forward + optimizer_state_bytes;
  const std::vector<std::size_t> backward = measure_unit_backward_bytes(model, images);
  std::vector<std::size_t> unit_gradients{gradient_bytes(model.conv1->parameters()) + gradient_bytes(model.bn1->parameters())};
  for (const auto& stage : model.stages)
    for (std::size_t b = 0; b < stage->size(); ++b) unit_gradients.push_back(gradient_bytes((*stage)[b]->parameters()));
  std::size_t later = gradient_bytes(model.fc->parameters());
  m.parameter_gradient_bytes.assign(m.units.size(), 0);
  for (std::size_t k = m.units.size(); k-- > 0;) {
    m.units[k].backward_bytes = backward.at(k) + later;
    later += unit_gradients.at(k);
    m.parameter_gradient_bytes[k] = later;  // its own (allocated in its measured backward) and those after it
  }
  return m;
}

std::size_t measure_step_peak(ResNet& model, const Tensor& images, const Tensor& labels,
                              std::size_t optimizer_state_bytes) {
  BufferRestorer restore(model);
  // Twice, the first unmeasured: a new pattern of allocations gives cuDNN new pointer alignments,
  // and with benchmark mode the first pass times engines for them, with workspaces that are not
  // the step's (they would make the measured peaks several times the step's).
  forward_backward_peak(model, images, labels);
  return forward_backward_peak(model, images, labels) + optimizer_state_bytes;
}

void apply_recompute(ResNet& model, const std::vector<RecomputeRun>& runs) {
  std::vector<std::vector<nn::Sequential::Run>> per_stage(model.stages.size());
  std::vector<std::vector<bool>> nested(model.stages.size());
  std::vector<std::size_t> stage_start;  // index of each stage's first unit (unit 0 is the stem)
  std::size_t units = 1;
  bool stem = false;
  for (const auto& stage : model.stages) {
    stage_start.push_back(units);
    units += stage->size();
  }
  for (const RecomputeRun& r : runs) {
    if (r.begin == 0 && r.end == 1 && !r.nested) {
      stem = true;
      continue;
    }
    if (r.begin == 0) throw ValueError("apply_recompute: the stem (unit 0) is recomputed on its own, got a run to unit " +
                                       std::to_string(r.end - 1));
    std::size_t s = 0;
    while (s + 1 < stage_start.size() && stage_start[s + 1] <= r.begin) ++s;
    const std::size_t stage_end = stage_start[s] + model.stages[s]->size();
    if (r.begin >= r.end || r.end > stage_end)
      throw ValueError("apply_recompute: run [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                       ") crosses a stage or is empty (stage " + std::to_string(s + 1) + " holds blocks " +
                       std::to_string(stage_start[s]) + " to " + std::to_string(stage_end - 1) + ")");
    per_stage[s].push_back({r.begin - stage_start[s], r.end - stage_start[s]});
    nested[s].push_back(r.nested);
  }
  for (std::size_t s = 0; s < model.stages.size(); ++s) model.stages[s]->set_recompute_runs(per_stage[s], nested[s]);
  model.set_recompute_stem(stem);
}

nlohmann::json units_json(const std::vector<RecomputeUnit>& units) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& u : units)
    out.push_back({{"name", u.name}, {"group", u.group}, {"retained_bytes", u.retained_bytes},
                   {"output_bytes", u.output_bytes}, {"forward_ms", u.forward_ms}, {"backward_bytes", u.backward_bytes}});
  return out;
}

std::vector<RecomputeUnit> units_from_json(const nlohmann::json& j) {
  if (!j.is_array()) throw ValueError("recompute units: expected a JSON array, got " + std::string(j.type_name()));
  if (j.size() > kMaxRecomputeUnits)
    throw ValueError("recompute units: " + std::to_string(j.size()) + " entries, more than the " +
                     std::to_string(kMaxRecomputeUnits) + " a plan takes");
  // Byte counts are bounded so that every sum the planner forms fits 64 bits; a negative or
  // larger number is refused, never wrapped.
  const auto byte_count = [](const nlohmann::json& v) {
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() > kMaxRecomputeBytes) throw ValueError("");
    return static_cast<std::size_t>(v.get<std::uint64_t>());
  };
  std::vector<RecomputeUnit> units;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& e = j[i];
    try {
      if (!e.is_object()) throw ValueError("");
      RecomputeUnit u{.name = printable(e.at("name").get<std::string>(), 60),  // shown on the terminal
                              .group = e.at("group").get<int>(),
                              .retained_bytes = byte_count(e.at("retained_bytes")),
                              .output_bytes = byte_count(e.at("output_bytes")),
                              .forward_ms = e.at("forward_ms").get<double>(),
                              // absent in files written before it was measured: estimated
                              .backward_bytes = e.contains("backward_bytes") ? byte_count(e["backward_bytes"]) : 0};
      if (!(u.forward_ms >= 0) || !std::isfinite(u.forward_ms) || (!units.empty() && u.group < units.back().group))
        throw ValueError("");
      units.push_back(std::move(u));
    } catch (const std::exception&) {
      throw ValueError("recompute units: entry " + std::to_string(i) + " must have name, group (non-decreasing), "
                       "retained_bytes, output_bytes (integers from 0 to 2^50), forward_ms >= 0 and optionally "
                       "backward_bytes; got " + json_excerpt(e));
    }
  }
  return units;
}

std::string describe_runs(const std::vector<RecomputeUnit>& units, const std::vector<RecomputeRun>& runs) {
  if (runs.empty()) return "none";
  std::string out;
  for (const RecomputeRun& r : runs) {
    if (!out.empty()) out += ", ";
    if (r.nested) out += "[";
    out += units.at(r.begin).name;
    if (r.end - r.begin > 1) out += "-" + units.at(r.end - 1).name;
    if (r.nested) out += "]";
  }
  return out;
}

}  // namespace sublet::models

namespace sublet::models {

RecomputeReport fit_memory_budget(ResNet& model, const MemoryBudget& budget, std::int64_t batch,
                                  const Shape& image_shape, std::int64_t classes, Device device, std::uint64_t seed,
                                  std::size_t optimizer_state_bytes) {
  if (image_shape.size() != 3)
    throw ShapeError("fit_memory_budget: expected an image shape C, H, W, got " + shape_str(image_shape));
  Generator g(seed);
  const Tensor images = randn({batch, image_shape[0], image_shape[1], image_shape[2]}, g).to(device);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(batch));
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i) % classes;
  return fit_memory_budget(model, budget, images, Tensor::from_vector(labels, {batch}).to(device), optimizer_state_bytes);
}

std::string RecomputeReport::summary() const {
  return fmt::format(
      "memory budget {}: recomputing {} (+{:.2f} ms of forward per step, {:.0f}% of the forward); peak {} measured "
      "({} predicted) against {} with nothing recomputed",
      format_bytes(static_cast<std::int64_t>(budget_bytes)), describe_runs(units, runs), recompute_ms,
      forward_ms > 0 ? 100.0 * recompute_ms / forward_ms : 0.0, format_bytes(static_cast<std::int64_t>(measured_peak)),
      format_bytes(static_cast<std::int64_t>(predicted_peak)), format_bytes(static_cast<std::int64_t>(baseline_peak))) +
         (measured_on_fraction > 1
              ? fmt::format(" (the blocks measured on 1/{} of the batch and scaled up: the whole step did not fit)",
                            measured_on_fraction)
              : std::string());
}

namespace {

// measure_blocks on the whole batch, or, where the unbudgeted step does not fit the device (the
// case a budget is for), on 1/2, 1/4, ... of it, scaled back up: activation bytes and times grow
// with the batch, what was allocated before the step (parameters, the batch) does not.
BlockMeasurement measure_blocks_that_fit(ResNet& model, const Tensor& images, const Tensor& labels,
                                         std::size_t optimizer_state_bytes, std::int64_t* divided_by) {
  const std::int64_t batch = images.size(0);
  for (std::int64_t divisor = 1;; divisor *= 2) {
    const std::int64_t part = batch / divisor;
    try {
      const std::size_t fixed = memory_allocated(images.device()) + optimizer_state_bytes;
      BlockMeasurement m = measure_blocks(model, images.narrow(0, 0, part), labels.narrow(0, 0, part), optimizer_state_bytes);
      *divided_by = divisor;
      if (divisor == 1) return m;
      const auto scale = [&](std::size_t bytes) { return bytes * static_cast<std::size_t>(divisor); };
      for (std::size_t k = 0; k < m.units.size(); ++k) {
        RecomputeUnit& u = m.units[k];
        u.retained_bytes = scale(u.retained_bytes);
        u.output_bytes = scale(u.output_bytes);
        u.forward_ms *= static_cast<double>(divisor);
        const std::size_t gradients = std::min(u.backward_bytes, m.parameter_gradient_bytes.at(k));  // not per image
        u.backward_bytes = scale(u.backward_bytes - gradients) + gradients;
      }
      m.forward_ms *= static_cast<double>(divisor);
      m.baseline_peak = fixed + scale(m.baseline_peak > fixed ? m.baseline_peak - fixed : 0);
      return m;
    } catch (const OutOfMemoryError&) {
      drop_gradients(model);
      empty_cache(images.device());
      if (part <= 1) throw;
    }
  }
}

}  // namespace

RecomputeReport fit_memory_budget(ResNet& model, const MemoryBudget& budget, const Tensor& images,
                                  const Tensor& labels, std::size_t optimizer_state_bytes) {
  std::int64_t divided_by = 1;
  const BlockMeasurement m = measure_blocks_that_fit(model, images, labels, optimizer_state_bytes, &divided_by);
  RecomputeReport r;
  r.measured_on_fraction = divided_by;
  r.budget_bytes = resolve_budget(budget, m.baseline_peak);
  r.baseline_peak = m.baseline_peak;
  r.forward_ms = m.forward_ms;
  r.units = m.units;
  r.fixed_bytes = m.fixed_bytes;
  // The peak model leaves out what backward adds while a run is recomputed (gradients of the
  // activations and of the parameters so far): a measured excess lowers the target it chooses for.
  std::size_t target = r.budget_bytes;
  std::optional<RecomputeReport> best;  // the lowest measured peak so far
  RecomputeChoice last;
  for (int attempt = 0; attempt < 4; ++attempt) {
    last = choose_recompute(m.units, m.baseline_peak, target, m.fixed_bytes);
    if (!last.fits) break;
    apply_recompute(model, last.runs);
    r.runs = last.runs;
    r.predicted_peak = last.predicted_peak;
    r.recompute_ms = last.recompute_ms;
    try {
      r.measured_peak = measure_step_peak(model, images, labels, optimizer_state_bytes);
    } catch (const OutOfMemoryError&) {  // the choice does not fit the device at all: aim lower
      drop_gradients(model);
      empty_cache(images.device());
      target -= target / 8;
      continue;
    }
    if (!best || r.measured_peak < best->measured_peak) best = r;
    if (r.measured_peak <= r.budget_bytes) {
      // The unbudgeted passes' cache goes back: a budgeted run should not keep their reservation.
      empty_cache(images.device());
      return r;
    }
    target -= std::min(target, r.measured_peak - r.budget_bytes);
  }
  apply_recompute(model, {});
  empty_cache(images.device());
  const std::string budget_text = format_bytes(static_cast<std::int64_t>(r.budget_bytes));
  if (best)
    throw ValueError(fmt::format("--memory-budget {}: the smallest peak measured was {} (recomputing {}), against {} "
                                 "with nothing recomputed; give a larger budget or a smaller batch",
                                 budget_text, format_bytes(static_cast<std::int64_t>(best->measured_peak)),
                                 describe_runs(m.units, best->runs), format_bytes(static_cast<std::int64_t>(m.baseline_peak))));
  throw ValueError(fmt::format("--memory-budget {}: no choice of blocks to recompute fits; the smallest peak reachable "
                               "is about {} (recomputing {}), against {} with nothing recomputed; give a larger budget "
                               "or a smaller batch",
                               budget_text, format_bytes(static_cast<std::int64_t>(last.predicted_peak)),
                               describe_runs(m.units, last.runs), format_bytes(static_cast<std::int64_t>(m.baseline_peak))));
}

}  // namespace sublet::models
