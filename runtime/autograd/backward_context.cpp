#include "runtime/autograd/backward_context.h"

#include "runtime/autograd/backward_observer.h"

namespace sublet::autograd {

void run_in_order(const ops::Context& ctx, const BackwardPasses& passes) {
  if (passes.main) passes.main(ctx);
  if (passes.side) passes.side(ctx);
}

void BackwardContext::run_passes(const ops::Context& ctx, BackwardPasses passes) const {
  const std::vector<BackwardObserver*>& observers = backward_observers();
  for (std::size_t i = observers.size(); i-- > 0;)
    if (observers[i]->place_passes(ctx, passes)) return;
  run_in_order(ctx, passes);
}

}  // namespace sublet::autograd
