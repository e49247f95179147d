#pragma once
// Whether ops record autograd nodes, per thread (on by default). NoGradGuard switches recording
// off for a scope: evaluation, optimizer updates, and the backward pass itself.
namespace sublet {

namespace autograd {
bool grad_mode_enabled();
void set_grad_mode_enabled(bool enabled);
}  // namespace autograd

class NoGradGuard {
 public:
  NoGradGuard() : previous_(autograd::grad_mode_enabled()) { autograd::set_grad_mode_enabled(false); }
  ~NoGradGuard() { autograd::set_grad_mode_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace sublet
