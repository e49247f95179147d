#include "runtime/autograd/grad_mode.h"

namespace sublet::autograd {
namespace {
thread_local bool grad_mode = true;
}
bool grad_mode_enabled() { return grad_mode; }
void set_grad_mode_enabled(bool enabled) { grad_mode = enabled; }
}  // namespace sublet::autograd
