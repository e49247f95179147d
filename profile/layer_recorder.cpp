#include "profile/layer_recorder.h"

#include <algorithm>

#include "core/errors.h"

namespace sublet::profile {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::Forward: return "fwd";
    case Phase::Backward: return "bwd";
    case Phase::Optimizer: return "optimizer";
    case Phase::Recompute: return "recompute";
  }
  return "?";
}

LayerRecorder::LayerRecorder(nn::Module& model, std::string model_name, EventLog& log)
    : model_(model), model_name_(std::move(model_name)), log_(log) {
  for (auto& [path, module] : model.named_modules()) {
    const std::string name = path.empty() ? model_name_ : path;
    const int depth = path.empty() ? 0 : 1 + static_cast<int>(std::count(path.begin(), path.end(), '.'));
    const bool leaf = module->named_children().empty();
    const std::string type = module->type_name();
    std::vector<nn::Module::HookId> ids;
    ids.push_back(module->register_forward_pre_hook(
        [this, name, type, depth, leaf](nn::Module&, const Tensor&) { begin(name, type, Phase::Forward, depth, leaf); }));
    ids.push_back(module->register_forward_hook(
        [this, name](nn::Module&, const Tensor&, const Tensor&) { end(name, Phase::Forward); }));
    ids.push_back(module->register_backward_pre_hook([this, name, type, depth, leaf](nn::Module&, const Tensor&) {
      // The loss's backward is over once the first module's backward starts.
      for (std::size_t i = open_.size(); i-- > 0;)
        if (open_[i].close_at_module_backward) end_at(i);
      begin(name, type, Phase::Backward, depth, leaf);
    }));
    ids.push_back(module->register_backward_hook([this, name](nn::Module&, const Tensor& grad_input, const Tensor&) {
      if (grad_input.defined()) {
        end(name, Phase::Backward);
        return;
      }
      // No gradient flows to this module's input: its own backward (weight gradients) has not
      // run yet. Keep the span open until the backward pass returns.
      for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
        const Span& s = spans_[it->span];
        if (s.module == name && s.phase == Phase::Backward) {
          it->close_at_end_of_backward = true;
          return;
        }
      }
    }));
    hooks_.emplace_back(module, std::move(ids));
  }
}

LayerRecorder::~LayerRecorder() {
  while (!open_.empty()) open_.pop_back();  // scopes restore the annotation innermost first
  for (auto& [module, ids] : hooks_)
    for (auto id : ids) module->remove_hook(id);
}

void LayerRecorder::open(const std::string& name, Phase phase) { begin(name, "", phase, 0, true); }

void LayerRecorder::close(const std::string& name, Phase phase) { end(name, phase); }

void LayerRecorder::open_until_module_backward(const std::string& name) {
  begin(name, "", Phase::Backward, 0, true);
  open_.back().close_at_module_backward = true;
}

void LayerRecorder::end_backward() {
  for (std::size_t i = open_.size(); i-- > 0;) {
    if (open_[i].close_at_end_of_backward || open_[i].close_at_module_backward) end_at(i);
  }
}

void LayerRecorder::begin(const std::string& module, const std::string& type, Phase phase, int depth, bool leaf) {
  // A forward inside an open backward span is a recomputation (nn::checkpoint).
  if (phase == Phase::Forward)
    for (const Open& o : open_)
      if (spans_[o.span].phase == Phase::Backward) phase = Phase::Recompute;
  memory::CachingAllocator& allocator = log_.allocator();
  Span s;
  s.step = step_;
  s.module = module;
  s.type = type;
  s.phase = phase;
  s.depth = depth;
  s.is_leaf = leaf;
  s.begin_event = log_.count();
  s.begin_ns = log_.now_ns();
  s.allocated_at_entry = allocator.memory_allocated();
  s.reserved_at_entry = allocator.memory_reserved();
  spans_.push_back(std::move(s));
  open_.push_back(Open{spans_.size() - 1,
                       std::make_unique<memory::AnnotationScope>(module + "/" + phase_name(phase))});
}

void LayerRecorder::end(const std::string& module, Phase phase) {
  for (std::size_t i = open_.size(); i-- > 0;) {
    const Span& s = spans_[open_[i].span];
    const bool recomputed = phase == Phase::Forward && s.phase == Phase::Recompute;
    if (s.module == module && (s.phase == phase || recomputed)) {
      end_at(i);
      return;
    }
  }
  throw Error("profile: no open " + std::string(phase_name(phase)) + " span for '" + module + "'");
}

void LayerRecorder::end_at(std::size_t position) {
  memory::CachingAllocator& allocator = log_.allocator();
  Span& s = spans_[open_[position].span];
  s.end_event = log_.count();
  s.end_ns = log_.now_ns();
  s.allocated_at_exit = allocator.memory_allocated();
  s.reserved_at_exit = allocator.memory_reserved();
  s.closed = true;
  // Backward spans of a residual block need not nest: the span may sit below others on the
  // stack. Scopes restore their predecessor on destruction, so unwind above it and rebuild.
  for (std::size_t i = open_.size(); i-- > position;) open_[i].scope.reset();
  open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(position));
  rebuild_scopes(position);
}

void LayerRecorder::rebuild_scopes(std::size_t from) {
  for (std::size_t i = from; i < open_.size(); ++i) {
    const Span& s = spans_[open_[i].span];
    open_[i].scope = std::make_unique<memory::AnnotationScope>(s.module + "/" + phase_name(s.phase));
  }
}

}  // namespace sublet::profile
