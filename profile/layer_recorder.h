#pragma once
// Hooks on every module of a model. Each hook marks where a span (module, phase) begins or ends
// in the allocation history and reads the allocator's counters there; while a span is open an
// AnnotationScope("<module path>/<phase>") is active, so the allocator stamps every block with
// the layer and phase that asked for it. Code outside modules (the input batch, the loss, the
// optimizer) is covered by spans opened explicitly, e.g.
//   { PhaseSpan s(recorder, "(optimizer.step)", Phase::Optimizer); optimizer.step(); }
//
// Backward spans follow the module's backward pre/post hooks. A module whose input does not
// require grad (the first layer, the model itself) gets its post hook at the same moment as its
// pre hook, before its weight gradients exist; its span is instead closed by end_backward(),
// when the backward pass has returned.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "memory/annotation.h"
#include "profile/event_log.h"
#include "runtime/nn/module.h"

namespace sublet::profile {

// Recompute: a module's forward run again inside backward (a block under nn::checkpoint, e.g.
// chosen by --memory-budget).
enum class Phase : std::uint8_t { Forward, Backward, Optimizer, Recompute };
const char* phase_name(Phase phase);  // "fwd", "bwd", "optimizer", "recompute"

// One module's work in one phase of one step: a range of the history.
struct Span {
  int step = 0;
  std::string module;       // dotted path; the model itself by its name; "(input)" etc. outside modules
  std::string type;         // the module's type_name(), or "" outside modules
  Phase phase = Phase::Forward;
  int depth = 0;            // 0 for the model and spans outside modules, 1 for its children, ...
  bool is_leaf = true;      // a module without children (or a span outside modules)
  std::uint64_t begin_event = 0, end_event = 0;  // [begin, end) in EventLog::events()
  std::int64_t begin_ns = 0, end_ns = 0;
  // The allocator's own counters at entry and exit (the history is checked against them).
  std::size_t allocated_at_entry = 0, allocated_at_exit = 0;
  std::size_t reserved_at_entry = 0, reserved_at_exit = 0;
  bool closed = false;
};

class LayerRecorder {
 public:
  // Registers the four hooks on every module of `model` (named_modules()); the model itself is
  // called `model_name` in the spans. Hooks are removed on destruction.
  LayerRecorder(nn::Module& model, std::string model_name, EventLog& log);
  ~LayerRecorder();
  LayerRecorder(const LayerRecorder&) = delete;
  LayerRecorder& operator=(const LayerRecorder&) = delete;

  void set_step(int step) { step_ = step; }
  int step() const { return step_; }

  // Spans outside modules. close() must name an open span of the current step.
  void open(const std::string& name, Phase phase);
  void close(const std::string& name, Phase phase);
  // The span opened by open_until_module_backward() ends when the first module backward begins
  // (the loss's backward runs before any module's).
  void open_until_module_backward(const std::string& name);
  // Closes the backward spans left open by modules whose input needs no gradient.
  void end_backward();

  const std::vector<Span>& spans() const { return spans_; }
  bool any_open() const { return !open_.empty(); }

 private:
  struct Open {
    std::size_t span;                                 // index into spans_
    std::unique_ptr<memory::AnnotationScope> scope;   // "<module>/<phase>"
    bool close_at_end_of_backward = false;
    bool close_at_module_backward = false;
  };
  void begin(const std::string& module, const std::string& type, Phase phase, int depth, bool leaf);
  void end(const std::string& module, Phase phase);
  void end_at(std::size_t position);
  void rebuild_scopes(std::size_t from);

  nn::Module& model_;
  std::string model_name_;
  EventLog& log_;
  int step_ = 0;
  std::vector<Span> spans_;
  std::vector<Open> open_;  // in opening order; the last one's scope is the innermost
  std::vector<std::pair<nn::Module*, std::vector<nn::Module::HookId>>> hooks_;
};

// RAII form of LayerRecorder::open/close.
class PhaseSpan {
 public:
  PhaseSpan(LayerRecorder& recorder, std::string name, Phase phase)
      : recorder_(recorder), name_(std::move(name)), phase_(phase) { recorder_.open(name_, phase_); }
  ~PhaseSpan() { recorder_.close(name_, phase_); }
  PhaseSpan(const PhaseSpan&) = delete;
  PhaseSpan& operator=(const PhaseSpan&) = delete;

 private:
  LayerRecorder& recorder_;
  std::string name_;
  Phase phase_;
};

}  // namespace sublet::profile
