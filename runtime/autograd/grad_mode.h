#pragma once
// Whether ops record autograd nodes, per thread (on by default). NoGradGuard switches recording
// off for a scope: evaluation, optimizer updates, and the backward pass itself. GradModeGuard
// sets it either way (torch.set_grad_enabled): nn::checkpoint records again inside a backward.
namespace sublet {

namespace autograd {
bool grad_mode_enabled();
void set_grad_mode_enabled(bool enabled);
}  // namespace autograd

class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(autograd::grad_mode_enabled()) {
    autograd::set_grad_mode_enabled(enabled);
  }
  ~GradModeGuard() { autograd::set_grad_mode_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

}  // namespace sublet
